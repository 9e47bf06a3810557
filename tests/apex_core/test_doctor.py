"""``apex doctor`` probes this machine for real: a folder it cannot write is a failure with its fix
(exit code 1), an agent CLI is found on PATH with or without a login, and the versions a bug
report needs are listed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from apex_core.doctor import _agent, _writable, diagnose
from tests.conftest import run_apex


def test_every_check_runs_and_the_versions_a_bug_report_needs_are_listed(tmp_path):
    diagnosis = diagnose(tmp_path / "results")
    names = [c.name for c in diagnosis.checks]
    assert names[:5] == ["apex", "torch", "triton", "confinement", "agent claude"]
    assert {"docs index", "patches", "writable results folder", "writable cache", "writable patch state"} <= set(names)
    assert all(c.detail for c in diagnosis.checks) and all(c.fix for c in diagnosis.checks if c.status != "ok")
    assert diagnosis.versions["torch"] != "-" and diagnosis.versions["pydantic"] != "-"


def test_a_folder_that_cannot_be_written_fails_with_the_way_out(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    check = _writable("results folder", blocker / "results")
    assert check.status == "fail" and str(blocker) in check.detail and "--results-dir" in check.fix
    assert _writable("results folder", tmp_path / "new" / "results").status == "ok"


def test_an_agent_cli_is_found_on_path_and_its_login_looked_for(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\nexit 0\n")
    os.chmod(bin_dir / "claude", 0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    missing_login = _agent("claude")
    assert missing_login.status == "warn" and "no credentials found" in missing_login.detail
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert _agent("claude").status == "ok" and "ANTHROPIC_API_KEY is set" in _agent("claude").detail
    absent = _agent("codex")
    assert absent.status == "warn" and "codex is not on PATH" in absent.detail


def test_apex_doctor_prints_json_and_exits_1_on_a_failed_check(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = run_apex("doctor", "--json", "--results-dir", str(blocker / "results"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert report["failed"] and [c["name"] for c in failed] == ["writable results folder"]
    table = run_apex("doctor", "--results-dir", str(tmp_path / "results"))
    assert table.returncode == 0, table.stdout + table.stderr
    assert table.stdout.splitlines()[0].startswith("ok    apex ") and "versions: torch " in table.stdout
