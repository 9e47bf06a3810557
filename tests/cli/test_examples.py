"""Every command's --help ends with examples, and each example is typed as the command takes it:
its own command path, and only options the command has."""

import shlex

import pytest
import typer

from apex_core.cli.examples import EXAMPLES
from apex_core.cli.main import app


def _commands() -> dict[str, object]:
    found: dict[str, object] = {}

    def walk(command: object, path: list[str]) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(app), [])
    return found


COMMANDS = _commands()


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_commands_help_shows_examples(path):
    command = COMMANDS[path]
    assert "Example" in (command.help or "") + (command.epilog or ""), f"apex {path} --help shows no example"


@pytest.mark.parametrize("path", sorted(EXAMPLES))
def test_each_example_names_its_command_and_only_options_it_has(path):
    assert path in COMMANDS, f"EXAMPLES names 'apex {path}', which is not a command"
    options = {opt for param in COMMANDS[path].params for opt in (*param.opts, *param.secondary_opts)}
    for example in EXAMPLES[path]:
        words = shlex.split(example.split(" > ")[0])
        assert words[:1 + len(path.split())] == ["apex", *path.split()], example
        unknown = [w for w in words if w.startswith("--") and w not in options]
        assert not unknown, f"{example}: apex {path} has no {unknown}"
