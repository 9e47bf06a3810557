"""What setup.sh hands uv from pip's configuration.

setup.sh installs with uv (parallel, about ten times faster than pip on the 2-core CI machine),
but uv reads none of pip's configuration: a machine whose pip is pointed at a mirror, a wheel
directory or a constraints file (as our CI machine's is, through /etc/pip.conf and PIP_*
variables) would otherwise resolve against PyPI alone. This module turns what ``pip config list``
reports into uv's command-line flags. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import ast
import subprocess
import sys

FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
"""pip's option -> uv's flag taking one value each."""


def _values(raw: str) -> list[str]:
    """The items of one ``pip config list`` value: quoted as Python reprs, lists split on blanks."""
    text = raw.strip()
    try:
        text = str(ast.literal_eval(text))
    except (ValueError, SyntaxError):
        text = text.strip("'\"")
    return text.split()


def uv_arguments(config_list: str) -> list[str]:
    """uv's flags for the options in ``config_list`` (the output of ``pip config list``).

    The environment (``:env:.`` keys, from PIP_* variables) overrides the files, and a later file
    an earlier one, as with pip itself; ``no-index`` becomes ``--no-index``.
    """
    from_files: dict[str, list[str]] = {}
    from_env: dict[str, list[str]] = {}
    for line in config_list.splitlines():
        key, sep, raw = line.partition("=")
        if not sep:
            continue
        option = key.rsplit(".", 1)[-1]
        if option not in FLAGS and option != "no-index":
            continue
        (from_env if key.startswith(":env:") else from_files)[option] = _values(raw)
    chosen = {**from_files, **from_env}
    arguments: list[str] = []
    for option, flag in FLAGS.items():
        for value in dict.fromkeys(chosen.get(option, [])):
            arguments += [flag, value]
    if any(value.lower() in ("1", "true", "yes", "on") for value in chosen.get("no-index", [])):
        arguments.append("--no-index")
    return arguments


def main() -> int:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    sys.stdout.write("".join(f"{argument}\n" for argument in uv_arguments(listed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
