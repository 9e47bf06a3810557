"""``apex source``: find, show, callers, callees, launches, grep and index through the real command,
JSON on stdout, one-line errors with exit 2, and exit 1 whenever nothing is found, in every subcommand
(on torch's own Triton kernels, which every install has)."""

from __future__ import annotations

import json

KERNEL = "_sampled_addmm_kernel"


def _one_line_error(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("apex: error: ") and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_find_show_launches_callers_and_callees_answer_in_json(apex_cli):
    (found, *_) = json.loads(apex_cli("source", "find", KERNEL, "--json").stdout)
    assert found["package"] == "torch" and found["location"].endswith(f":{found['line']}") and found["launchers"]
    shown = json.loads(apex_cli("source", "show", found["location"], "--context", "2", "--json").stdout)
    assert (shown["start"], shown["end"]) == (found["line"] - 2, found["line"] + 2) and KERNEL in shown["text"]
    (site, *_) = json.loads(apex_cli("source", "launches", KERNEL, "--json").stdout)
    assert site["kernel"] == KERNEL and site["launcher"] in found["launchers"]
    callers = json.loads(apex_cli("source", "callers", KERNEL, "--json").stdout)
    assert callers[0]["kind"] == "launch" and callers[0]["line"] == site["line"]
    callees = json.loads(apex_cli("source", "callees", site["launcher"].rsplit(".", 1)[0], "--json").stdout)
    assert any(c["kind"] == "launch" and c["target"] == KERNEL and c["target_is_kernel"] for c in callees)


def test_grep_and_index_summaries(apex_cli):
    result = json.loads(apex_cli("source", "grep", r"tl\.dot\(", "--package", "torch", "--limit", "2", "--json").stdout)
    assert len(result["hits"]) == 2 and result["truncated"] and all("tl.dot(" in h["text"] for h in result["hits"])
    summary = json.loads(apex_cli("source", "index", "--json").stdout)
    assert "torch" in {p["package"] for p in summary["packages"]}
    table = apex_cli("source", "show", KERNEL)
    assert table.returncode == 0 and "@triton.jit" in table.stdout


def test_user_errors_are_one_line(apex_cli):
    assert "outside the indexed sources" in _one_line_error(apex_cli("source", "show", "/etc/hostname"))
    assert "not a valid regular expression" in _one_line_error(apex_cli("source", "grep", "("))
    assert "not indexed here" in _one_line_error(apex_cli("source", "grep", "x", "--package", "nope"))
    assert "context" in _one_line_error(apex_cli("source", "show", KERNEL, "--context", "-1"))


def test_nothing_found_is_exit_1_in_every_subcommand_and_a_mistake_exit_2(apex_cli):
    for args in (("find", "nvjet_sm90_tst_256x8"), ("launches", "nvjet_sm90_tst_256x8"), ("callees", "no_such_function_xyz"),
                 ("show", "no_such_function_xyz"), ("callers", "no_such_function_xyz"), ("grep", "no_such_text_xyz_123"),
                 ("grep", "no_such_text_xyz_123", "--json")):
        done = apex_cli("source", *args)
        assert done.returncode == 1 and "Traceback" not in done.stderr, (args, done.stdout, done.stderr)
        assert "apex: error" not in done.stderr, args
    assert _one_line_error(apex_cli("source", "grep", "("))
