"""The ``apex-kernels`` verifiers environment: ``vf.load_environment("apex-kernels", task_ids=[...])``
imports this module and calls its ``load_environment`` (apex_core/rl/verifiers_env.py)."""

from apex_core.rl.verifiers_env import load_environment

__all__ = ["load_environment"]
