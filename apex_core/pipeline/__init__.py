"""``apex run``: the whole pipeline in one command, resumable, each stage also a command of its own.

benchmark -> identify -> optimize -> grade -> integrate -> benchmark-final -> score -> report.
``config`` holds what the user chose, ``state`` what has been done (``<run>/state.json``, so an
interrupted run resumes where it stopped), ``stages`` what each stage does with the stages of the
layers below, ``runner`` the order and the resume, ``optimize`` the agent loop of one kernel.
"""
