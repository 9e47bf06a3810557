"""Apex inside RL trainers: one episode core (``environment.py``) and its adapters for OpenEnv
(``openenv_server.py``, ``apex env serve``), verifiers (``verifiers_env.py``, the ``apex-kernels``
environment) and TRL's GRPOTrainer (``trl_reward.py``). The adapters import their framework only
when used; docs/rl.md shows each."""

from apex_core.rl.completions import CompletionGrader, extract_code
from apex_core.rl.environment import NO_SOLUTION_REWARD, KernelEnvironment
from apex_core.rl.models import Action, EpisodeSettings, Observation, Submit, ToolCall

__all__ = ["NO_SOLUTION_REWARD", "Action", "CompletionGrader", "EpisodeSettings", "KernelEnvironment", "Observation", "Submit",
           "ToolCall", "extract_code"]
