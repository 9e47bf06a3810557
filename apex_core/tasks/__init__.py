"""Tasks: the format (schema), the catalogue of definitions, and the solution contract."""

from apex_core.tasks.catalog import all_tasks, find_tasks, get_task
from apex_core.tasks.schema import Task, load_reference

__all__ = ["Task", "all_tasks", "find_tasks", "get_task", "load_reference"]
