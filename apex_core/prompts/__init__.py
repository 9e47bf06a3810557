"""The two-layer prompt: a system prompt for the agent's role and rules, a task prompt per task."""

from apex_core.prompts.system import CLI_COMMANDS, system_prompt
from apex_core.prompts.task import PromptRecord, build_record, task_prompt

__all__ = ["CLI_COMMANDS", "PromptRecord", "build_record", "system_prompt", "task_prompt"]
