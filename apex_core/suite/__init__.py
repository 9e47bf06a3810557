"""Tooling over the whole task suite: verifying tasks on a machine (``verify``, ``verify_runs``,
``interpreter_check``), exporting them for RL frameworks (``export``) and ordering them for
training (``curriculum``). It sits above the grader and the prompts, which it uses; the task
schema and catalogue below it (``apex_core.tasks``) never import it."""
