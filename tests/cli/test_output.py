"""Output that is not a terminal is plain: tables without box-drawing characters, a row per line,
no cell cut or wrapped, no trailing blanks; on a terminal tables are drawn as rich draws them."""

import io

from rich.table import Table

from apex_core.cli.output import ApexConsole, PIPED_WIDTH


def _table() -> Table:
    table = Table(title="2 tasks")
    for column in ("id", "what it does"):
        table.add_column(column, overflow="fold", max_width=10)
    table.add_row("cpu-mini__rms_norm", "RMSNorm over float32 NumPy rows: y = x / sqrt(mean(x^2) + eps) * weight " * 3)
    table.add_row("cpu-mini__silu_and_mul", "short")
    return table


def _printed(terminal: bool) -> str:
    out = io.StringIO()
    ApexConsole(file=out, force_terminal=terminal, width=80 if terminal else PIPED_WIDTH).print(_table())
    return out.getvalue()


def test_a_piped_table_is_a_title_a_header_and_one_whole_line_per_row():
    lines = _printed(terminal=False).splitlines()
    assert lines[0] == "2 tasks" and lines[1].split() == ["id", "what", "it", "does"] and len(lines) == 4
    assert lines[2].startswith("cpu-mini__rms_norm ") and lines[2].endswith("* weight")
    assert lines[3].split() == ["cpu-mini__silu_and_mul", "short"]
    assert not any(char in "".join(lines) for char in "┃━│─┏┡") and all(line == line.rstrip() for line in lines)


def test_a_table_on_a_terminal_keeps_its_box():
    assert "┃" in _printed(terminal=True)


def test_text_that_is_not_a_table_is_printed_as_it_was():
    out = io.StringIO()
    ApexConsole(file=out, force_terminal=False, width=PIPED_WIDTH, markup=False).print("report: [x] done", highlight=False)
    assert out.getvalue() == "report: [x] done\n"
