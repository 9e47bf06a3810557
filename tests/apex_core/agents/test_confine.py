"""An agent's session, confined (``apex_core.agents.confine``): what a process started the way the
backends start their hosts can and cannot reach. The hosts themselves (Claude Code, Codex) trying
the same through their own tools are in tests/conformance/test_agent_confinement.py."""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from apex_core.agents import confine, headless
from apex_core.errors import AgentUnavailableError, ApexUserError
from apex_core.tasks.reference_solutions import REFERENCE_SOLUTIONS_DIR

REPO_ROOT = Path(__file__).resolve().parents[3]
needs_confinement = pytest.mark.skipif(
    confine.unconfined() or confine.confinement_problem() is not None,
    reason=f"sessions cannot be confined here: {confine.confinement_problem() if not confine.unconfined() else 'opted out'}")


def _run(session: confine.Session, code: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = session.command([sys.executable, "-c", textwrap.dedent(code), *args], cwd)
    return subprocess.run(argv, cwd=cwd, env=session.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, check=False)


PROBE = """
    import errno, json, os, socket, sys
    def attempt(action):
        try:
            action()
            return "ok"
        except OSError as error:
            return errno.errorcode.get(error.errno, str(error.errno))
    def write(path):
        with open(path, "w") as handle:
            handle.write("import os\\n")
    site, reference, secret, folder, repository, port, judge = sys.argv[1:]
    status = open("/proc/self/status").read()
    connection = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    connection.sendall(b"from inside")
    connection.close()
    print(json.dumps({
        "site-packages": attempt(lambda: write(os.path.join(site, "apex_session_probe.pth"))),
        "apex_core": attempt(lambda: write(os.path.join(repository, "apex_core", "_apex_session_probe.py"))),
        "reference": attempt(lambda: open(reference).read()),
        "secret": attempt(lambda: open(secret).read()),
        "own folder": attempt(lambda: write(os.path.join(folder, "solution.py"))),
        "home": attempt(lambda: write(os.path.join(os.environ["HOME"], "notes.txt"))),
        "judge": attempt(lambda: os.kill(int(judge), 0)),
        "repository": sorted(os.listdir(repository)),
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "uid": os.getuid(),
        "capabilities": [line.split()[1] for line in status.splitlines() if line.startswith("CapEff")][0],
    }))
"""


@needs_confinement
def test_a_session_writes_only_its_folder_and_sees_no_reference_solution_home_or_other_process(tmp_path):
    site = sysconfig.get_paths()["purelib"]
    reference = REFERENCE_SOLUTIONS_DIR / "rms_norm" / "solution.py"  # not readable at all by an ordinary user where root sealed it
    secret = Path.home() / f".apex-session-secret-{secrets.token_hex(4)}"
    secret.write_text("the user's key")
    folder = tmp_path / "output" / "task"
    folder.mkdir(parents=True)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(60)
    try:
        with confine.Session("claude", [folder]) as session:
            done = _run(session, PROBE, folder, site, str(reference), str(secret), str(folder), str(REPO_ROOT),
                        str(listener.getsockname()[1]), str(os.getpid()))
            home = session.home
            connection, _ = listener.accept()
            heard = connection.recv(100)
            connection.close()
    finally:
        secret.unlink()
        listener.close()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["site-packages"] == seen["apex_core"] == "EROFS"
    assert seen["reference"] == seen["secret"] == "ENOENT"
    assert seen["own folder"] == seen["home"] == "ok" and (folder / "solution.py").is_file()
    assert not Path(site, "apex_session_probe.pth").exists()
    assert not (REPO_ROOT / "apex_core" / "_apex_session_probe.py").exists()  # a canary: no real module is ever at risk
    assert seen["judge"] == "ESRCH" and max(seen["pids"]) < 100  # a PID namespace of its own
    assert seen["uid"] == 65534 and int(seen["capabilities"], 16) == 0
    assert heard == b"from inside"  # the host's network: its CLI must reach its model's API
    shown = set(seen["repository"])
    assert {"apex_core", "servers", "docs", "skills"} <= shown
    assert not shown & {"reference_solutions", ".git", "tests", "benchmarks", "output", "results", "scripted_model"}
    assert not home.exists()  # the session's home went with it


@needs_confinement
def test_the_host_login_is_copied_in_and_a_session_cannot_change_the_users_own(tmp_path, monkeypatch):
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "auth.json").write_text('{"token": "abc"}')
    (codex_home / "config.toml").write_text('model = "m"\n')
    (codex_home / "history.jsonl").write_text("not copied\n")
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    folder = tmp_path / "work"
    folder.mkdir()
    code = """
        import os, json, sys
        home = os.environ["CODEX_HOME"]
        seen = {"files": sorted(os.listdir(home)), "auth": open(os.path.join(home, "auth.json")).read()}
        open(os.path.join(home, "config.toml"), "w").write("[mcp_servers.evil]\\ncommand = 'sh'\\n")
        try:
            open(sys.argv[1] + "/config.toml", "w")
            seen["original"] = "written"
        except OSError as error:
            seen["original"] = error.strerror
        print(json.dumps(seen))
    """
    with confine.Session("codex", [folder]) as session:
        assert session.env["CODEX_HOME"] == str(session.home / ".codex")
        done = _run(session, code, folder, str(codex_home))
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["files"] == ["auth.json", "config.toml"] and seen["auth"] == '{"token": "abc"}'
    assert seen["original"] == "No such file or directory"
    assert (codex_home / "config.toml").read_text() == 'model = "m"\n'


@needs_confinement
def test_a_grader_started_inside_a_session_still_confines_the_solutions_it_runs(tmp_path):
    code = "from apex_core.grader.isolation.process import confinement_problem; print(confinement_problem())"
    with confine.Session("claude", [tmp_path]) as session:
        done = _run(session, code, tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "None", done.stdout + done.stderr


@needs_confinement
def test_a_session_cut_by_its_time_limit_leaves_no_process_behind(tmp_path):
    marker = f"apex-session-{secrets.token_hex(6)}"
    code = f"import subprocess, sys, time  # {marker}\nsubprocess.Popen([sys.executable, '-c', 'import time  # {marker}\\ntime.sleep(600)'], start_new_session=True)\ntime.sleep(600)"
    with confine.Session("claude", [tmp_path]) as session:
        ran = headless.run_session(session.command([sys.executable, "-c", code], tmp_path), tmp_path, 3, session.env)
    assert ran.exit_code is None
    left = []
    for entry in Path("/proc").iterdir():
        try:
            alive = entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes()
            if alive and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                left.append(entry.name)
        except OSError:
            continue
    assert left == []


@needs_confinement
def test_a_working_folder_the_view_lacks_is_shown_read_only_and_one_inside_the_repository_is_refused(tmp_path):
    project = tmp_path / "project"  # where `apex eval --output-dir elsewhere` may run
    project.mkdir()
    (project / "notes.md").write_text("mine")
    output = tmp_path / "output"
    output.mkdir()
    with confine.Session("claude", [output]) as session:
        done = _run(session, "import os; print(os.listdir('.')); open('new.txt', 'w')", project)
        with pytest.raises(AgentUnavailableError, match="parts of Apex's repository an agent may not see"):
            session.command([sys.executable], REPO_ROOT / "tests")
    assert done.stdout.strip() == "['notes.md']" and "Read-only file system" in done.stderr
    assert not (project / "new.txt").exists()


def test_a_writable_folder_that_would_open_a_home_the_repository_or_the_root_is_refused(tmp_path):
    for folder, named in ((Path.home(), "a home folder"), (REPO_ROOT, "Apex's repository"), (Path("/"), "the root")):
        with pytest.raises(AgentUnavailableError, match=named) as refused:
            confine.Session("claude", [folder])
        assert "\n" not in str(refused.value)
    with pytest.raises(AgentUnavailableError, match="is not a folder"):
        confine.Session("claude", [tmp_path / "missing"])


def test_the_view_shows_no_path_entry_inside_or_above_the_repository_beyond_what_agents_read(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [*sys.path, str(REPO_ROOT / "tests"), str(REPO_ROOT.parent), str(REFERENCE_SOLUTIONS_DIR)])
    tasks = tmp_path / "my-tasks"
    tasks.mkdir()
    view = confine.session_view(tmp_path / "home", [], [], {"APEX_TASK_DIRS": os.pathsep.join([str(tasks), str(Path.home())])})
    shown = [Path(p).resolve() for p in view.read_only]
    assert tasks.resolve() in shown and Path.home().resolve() not in shown  # a setting naming the home folder shows none of it
    inside = {p.relative_to(REPO_ROOT).parts[0] for p in shown if p.is_relative_to(REPO_ROOT) and p != REPO_ROOT}
    assert inside <= set(confine.REPOSITORY_ENTRIES) | {".venv"} and "apex_core" in inside
    assert REPO_ROOT not in shown and not any(REPO_ROOT.is_relative_to(p) for p in shown)
    assert view.session and str(tmp_path / "home") in view.writable


def test_an_npm_host_brings_its_whole_node_modules_folder(tmp_path):
    binary = tmp_path / "lib" / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"
    assert confine.installation(str(binary)) == str(tmp_path / "lib" / "node_modules")
    assert confine.installation("/opt/cursor/versions/1/cursor-agent") == "/opt/cursor/versions/1"


def test_agents_run_unconfined_only_when_asked_and_a_bad_value_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(confine.UNCONFINED_ENV, "1")
    with confine.Session("claude", [tmp_path]) as session:
        assert not session.confined and session.command(["claude", "-p", "x"], tmp_path) == ["claude", "-p", "x"]
        assert session.env["HOME"] == os.environ["HOME"]
    monkeypatch.setenv(confine.UNCONFINED_ENV, "yes")
    with pytest.raises(ApexUserError, match="APEX_AGENT_UNCONFINED must be 1") as refused:
        confine.require()
    assert "\n" not in str(refused.value)


def test_the_transcript_is_never_written_through_a_link_or_a_fifo_the_agent_left(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("the user's file\n")
    transcript = tmp_path / "agent_transcript.jsonl"
    transcript.symlink_to(victim)
    headless.append_transcript(transcript, '{"type": "result"}\n')
    assert victim.read_text() == "the user's file\n"
    assert not transcript.is_symlink() and transcript.read_text() == '{"type": "result"}\n'
    transcript.unlink()
    os.mkfifo(transcript)  # opening it to write would wait for a reader for ever
    headless.append_transcript(transcript, "line\n")
    assert stat.S_ISREG(transcript.stat().st_mode) and transcript.read_text() == "line\n"


def test_the_source_index_is_found_where_the_source_tools_look_for_it(tmp_path, monkeypatch):
    from apex_core.sources.index import source_cache_dir

    monkeypatch.delenv("APEX_SOURCE_CACHE_DIR", raising=False)
    monkeypatch.setenv("APEX_CACHE_DIR", str(tmp_path / "cache"))
    assert confine.source_cache_dir(os.environ) == source_cache_dir().resolve()
    monkeypatch.setenv("APEX_SOURCE_CACHE_DIR", str(tmp_path / "sources"))
    assert confine.source_cache_dir(os.environ) == source_cache_dir().resolve() == (tmp_path / "sources").resolve()


@needs_confinement
def test_links_and_fifos_a_session_leaves_in_its_folder_are_gone_before_apex_touches_it(tmp_path):
    """What Apex does with the folder next runs with the user's rights: a solution.py linked to a
    reference solution would be graded as the agent's, a grade file linked elsewhere overwritten."""
    folder = tmp_path / "output" / "task"
    folder.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("the user's file\n")
    reference = REFERENCE_SOLUTIONS_DIR / "rms_norm" / "solution.py"
    code = f"""
        import os
        os.symlink({str(reference)!r}, "solution.py")
        os.symlink({str(victim)!r}, "grade_iter1.json")
        os.makedirs("notes/deeper")
        os.symlink("/", "notes/deeper/root")
        os.mkfifo("agent_transcript.jsonl.lock")
        open("notes/kept.txt", "w").write("a file of its own")
    """

    def start() -> headless.Session:
        with confine.Session("claude", [folder]) as session:
            argv = session.command([sys.executable, "-c", textwrap.dedent(code)], folder)
            return headless.run_session(argv, folder, 60, session.env)

    run = headless.run_agent("claude", start, lambda s: headless.Reading([], None, "done"), folder / "solution.py",
                             folder / "agent_transcript.jsonl", "log in")
    assert run.exit_code == 0 and not run.wrote_solution
    assert f"solution.py -> {reference}" in run.summary and "notes/deeper/root -> /" in run.summary
    left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    assert left == ["agent_transcript.jsonl", "notes", "notes/deeper", "notes/kept.txt"]
    (folder / "grade_iter1.json").write_text("{}")  # as the pipeline writes its grading there
    assert victim.read_text() == "the user's file\n"
