"""The ASGI app OpenEnv's tooling expects at ``openenv.yaml``'s ``app`` (``uvicorn
apex_core.rl.openenv_app:app``, the Docker image, ``openenv serve``): the same server as
``apex env serve``, set by environment variables instead of options.

APEX_ENV_TASKS (comma-separated task ids; default all), APEX_ENV_MAX_TURNS (8),
APEX_ENV_MAX_SUBMISSIONS (1), APEX_ENV_MAX_SESSIONS (16), APEX_ENV_RECORD_DIR (unset: none),
APEX_ENV_EXECUTOR (local or ray) and RAY_ADDRESS.
"""

from __future__ import annotations

import os

from apex_core.executors import make_executor
from apex_core.rl.environment import tasks_for
from apex_core.rl.models import EpisodeSettings
from apex_core.rl.openenv_server import make_app
from apex_core.suite.curriculum import Curriculum

_tasks = [t.strip() for t in os.environ.get("APEX_ENV_TASKS", "").split(",") if t.strip()]
_executor = os.environ.get("APEX_ENV_EXECUTOR", "local")
app = make_app(make_executor(_executor, os.environ.get("RAY_ADDRESS") if _executor == "ray" else None),
               EpisodeSettings(max_turns=int(os.environ.get("APEX_ENV_MAX_TURNS", "8")),
                               max_submissions=int(os.environ.get("APEX_ENV_MAX_SUBMISSIONS", "1")),
                               record_dir=os.environ.get("APEX_ENV_RECORD_DIR") or None),
               Curriculum(tasks_for(_tasks or None)), max_sessions=int(os.environ.get("APEX_ENV_MAX_SESSIONS", "16")))
