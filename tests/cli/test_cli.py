"""The `apex` command line as a user runs it, bad input included."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from apex_core.tasks.catalog import DEFINITIONS_DIR

CANNED = "apex_core/agents/canned/cpu-mini__rms_norm.py"


def _one_line_error(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[0].startswith("apex: error: ")
    return lines[0]


def test_tasks_list_as_json(apex_cli):
    done = apex_cli("tasks", "list", "--json")
    assert done.returncode == 0
    ids = {row["id"] for row in json.loads(done.stdout)}
    assert {"cpu-mini__rms_norm", "llama-3-1-8b-instruct__rms_norm"} <= ids


def test_tasks_list_filters_and_shows_a_table(apex_cli):
    done = apex_cli("tasks", "list", "--model", "meta-llama/Llama-3.1-8B-Instruct")
    assert done.returncode == 0 and "llama-3-1-8b-instruct__rms_norm" in done.stdout and "cpu-mini" not in done.stdout


def test_tasks_show(apex_cli):
    done = apex_cli("tasks", "show", "llama-3-1-8b-instruct__rms_norm")
    assert done.returncode == 0
    assert "rms_norm(x: torch.Tensor" in done.stdout and "output/llama-3-1-8b-instruct__rms_norm/solution.py" in done.stdout


def test_prompt_for_one_task(apex_cli):
    done = apex_cli("prompt", "--task-id", "llama-3-1-8b-instruct__rms_norm")
    assert done.returncode == 0
    assert done.stdout.startswith("You are a GPU kernel engineer")
    assert "# Task llama-3-1-8b-instruct__rms_norm" in done.stdout


def test_prompt_list_and_all(apex_cli):
    ids = apex_cli("prompt", "--list").stdout.split()
    lines = apex_cli("prompt", "--all").stdout.splitlines()
    assert len(lines) == len(ids) >= 2
    assert [json.loads(line)["task_id"] for line in lines] == sorted(ids)


def test_hardware_json_defaults_to_gfx950_without_a_gpu_and_honours_an_override(apex_cli):
    data = json.loads(apex_cli("hardware", "--json").stdout)
    if data["detected"]["vendor"] == "cpu":
        assert data["target"]["origin"] == "default" and data["target"]["arch"] == "gfx950"
        assert data["target"]["spec"]["hbm_bandwidth_tbs"] == 8.0
    override = json.loads(apex_cli("hardware", "--json", "--gpu", "h100").stdout)
    assert override["target"]["arch"] == "sm_90" and override["target"]["origin"] == "override"


def test_eval_dry_run_prints_a_score_report(apex_cli, tmp_path):
    done = apex_cli("eval", "--dry-run", "--output-dir", str(tmp_path / "output"))
    assert done.returncode == 0, done.stderr
    assert "Score report: cpu-mini__rms_norm" in done.stdout
    assert "ok" in done.stdout and "normalized" in done.stdout
    assert (tmp_path / "output" / "cpu-mini__rms_norm" / "grade_result.json").is_file()


def test_grade_prints_json_and_exits_zero_whatever_the_verdict(apex_cli, tmp_path):
    wrong = tmp_path / "solution.py"
    wrong.write_text("def rms_norm(x, weight, eps):\n    return x.copy()\n")
    done = apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", str(wrong), "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)[0]["outcome"] == "wrong_answer"


def test_grade_takes_several_solutions_after_one_flag(apex_cli, tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def rms_norm(x, weight, eps):\n    return x.copy()\n")
    canned = "apex_core/agents/canned/cpu-mini__rms_norm.py"
    done = apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", str(wrong), canned, "--json", "--no-cache")
    assert done.returncode == 0, done.stderr
    assert [r["outcome"] for r in json.loads(done.stdout)] == ["wrong_answer", "ok"]


def test_grade_takes_a_folder_of_candidates_and_ends_with_a_summary_table_best_score_first(apex_cli, tmp_path):
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    (candidates / "a_wrong.py").write_text("def rms_norm(x, weight, eps):\n    return x.copy()\n")
    shutil.copyfile("apex_core/agents/canned/cpu-mini__rms_norm.py", candidates / "b_canned.py")
    (candidates / "notes.txt").write_text("not a solution")
    (candidates / ".hidden.py").write_text("raise SystemExit('a hidden file is not a candidate')")
    cache = {"APEX_CACHE_DIR": str(tmp_path / "cache")}
    graded = apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", str(candidates), "--no-timing", "--json", env=cache)
    assert graded.returncode == 0, graded.stderr
    assert [(Path(r["solution_path"]).name, r["outcome"]) for r in json.loads(graded.stdout)] == [
        ("a_wrong.py", "wrong_answer"), ("b_canned.py", "ok")]
    table = apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", str(candidates), "--no-timing",
                     env={**cache, "COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    summary = table.stdout[table.stdout.index("2 solutions of cpu-mini__rms_norm, best score first"):]
    assert "Grade 1 of 2: a_wrong.py" in table.stdout
    assert summary.index("b_canned.py") < summary.index("a_wrong.py")  # the correct one ranks first


def test_grade_runs_the_triton_task_in_the_interpreter_and_says_timing_means_nothing_there(apex_cli):
    done = apex_cli("grade", "--task", "llama-3-1-8b-instruct__rms_norm", "--solution",
                    "apex_core/kernels/rms_norm/baseline_triton.py", "--json", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)[0]
    assert result["outcome"] == "ok" and result["correct"] and result["speedup"] is None
    assert any(flag.startswith("not_timed") for flag in result["flags"])
    assert result["provenance"]["timing_method"].startswith("not timed: Triton ran in the CPU interpreter")
    progress = [line for line in done.stderr.splitlines() if line.startswith("grading")]
    assert any("checking correctness, case" in line for line in progress)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["tasks", "show", "llama-3-1-8b-instruct__rmsnorm"], "did you mean 'llama-3-1-8b-instruct__rms_norm'"),
        (["prompt", "--task-id", "cpu-mini_rms_norm"], "did you mean 'cpu-mini__rms_norm'"),
        (["eval", "--dry-run", "--task-id", "nope"], "unknown task id 'nope'"),
        (["grade", "--task", "nope", "--solution", "x.py"], "unknown task id 'nope'"),
        (["grade", "--task", "cpu-mini__rms_norm", "--solution", "/no/such/solution.py"], "does not exist"),
        (["grade", "--task", "cpu-mini__rms_norm", "--solution", "apex_core/grader/isolation/hip_on_cuda"],
         "holds no .py solution file for the python task cpu-mini__rms_norm"),
        (["hardware", "--gpu", "gfx9500"], "did you mean 'gfx950'"),
        (["prompt", "--task-id", "cpu-mini__rms_norm", "--gpu", "rtx9090"], "unknown GPU arch or product 'rtx9090'"),
        (["tasks", "list", "--kernel", "rmsnorm"], "did you mean 'rms_norm'"),
        (["tasks", "list", "--model", "llama-9"], "unknown model 'llama-9'"),
        (["prompt"], "give exactly one of --task-id ID, --list or --all"),
        (["eval", "--dry-run", "--task-id", "llama-3-1-8b-instruct__rms_norm"], "no stored solution"),
        (["eval", "--agent", "gpt-42"], "unknown agent backend 'gpt-42'"),
        (["tasks", "list", "--colour"], "No such option: --colour"),
        (["mcp", "install", "--client", "vscode"], "unknown agent client 'vscode'"),
        (["grade", "--task", "cpu-mini__rms_norm", "--solution", "x.py", "--device", "gpu0"], "is not a device"),
        (["grade", "--task", "cpu-mini__rms_norm", "--solution", "apex_core/agents/canned/cpu-mini__rms_norm.py",
          "--device", "0"], "is a CPU task"),
        (["grade", "--task", "llama-3-1-8b-instruct__rms_norm", "--solution",
          "apex_core/kernels/rms_norm/baseline_triton.py", "--device", "7", "--no-cache"], "does not exist here"),
        (["grade", "--task", "llama-3-1-8b-instruct__rms_norm", "--solution",
          "apex_core/kernels/rms_norm/baseline_triton.py", "--device", "cuda:x"], "--device 'cuda:x' is not a device"),
        (["grade", "--task", "cpu-mini__rms_norm", "--solution", CANNED, "--timeout", "0"],
         "--timeout 0 is not a number of seconds above 0 and at most 3600; e.g. --timeout 180"),
        (["grade", "--task", "cpu-mini__rms_norm", "--solution", CANNED, "--timeout", "-5"], "--timeout -5 is not a number"),
        (["grade", "--task", "cpu-mini__rms_norm", "--solution", CANNED, "--timeout", "inf"], "--timeout inf is not a number"),
        (["grade", "--task", "cpu-mini__rms_norm", "--solution", CANNED, "--timeout", "nan"], "--timeout nan is not a number"),
        (["grade", "--task", "cpu-mini__rms_norm", "--solution", "s" * 300 + ".py"], "cannot be opened: File name too long"),
        (["tasks", "export", "--output", "no/such/folder/tasks.jsonl"],
         "--output no/such/folder/tasks.jsonl: the folder no/such/folder does not exist; create it first"),
        (["tasks", "export", "--output", "tests"], "--output tests is a folder; give a file to write, e.g. --output tests/tasks.jsonl"),
        (["tasks", "verify", "--task", "cpu-mini__rms_norm", "--device", "99"], "device cuda:99 does not exist here"),
        (["tasks", "verify", "--task", "cpu-mini__rms_norm", "--device", "gpu0"], "--device 'gpu0' is not a device"),
        (["tasks", "verify", "--task", "cpu-mini__rms_norm", "--gpus", "-1"], "--gpus -1 is not a number of GPUs"),
        (["tasks", "verify", "--task", "cpu-mini__rms_norm", "--jsonl", "tests"],
         "--jsonl tests is a folder; give a file to write, e.g. --jsonl tests/verify.jsonl"),
        (["tasks", "verify", "--task", "cpu-mini__rms_norm", "--jsonl", "no/such/verify.jsonl"],
         "--jsonl no/such/verify.jsonl: the folder no/such does not exist; create it first"),
        (["eval", "--dry-run", "--max-turns", "0"], "Invalid value for '--max-turns'"),
    ],
)
def test_bad_input_is_exit_2_and_one_clear_line(apex_cli, args, expected):
    assert expected in _one_line_error(apex_cli(*args))


def test_resuming_from_a_file_that_is_not_verdicts_is_one_line_before_any_task_is_verified(apex_cli, tmp_path):
    binary = tmp_path / "verify.jsonl"
    binary.write_bytes(bytes(range(128, 256)))
    line = _one_line_error(apex_cli("tasks", "verify", "--task", "cpu-mini__rms_norm", "--jsonl", str(binary), "--resume"))
    assert "is not a file of verdicts (not UTF-8 text)" in line and binary.read_bytes() == bytes(range(128, 256))


def test_a_malformed_user_task_definition_is_exit_2_and_names_the_file(apex_cli, tmp_path):
    broken = tmp_path / "cpu-mini__rms_norm.toml"
    shutil.copyfile(DEFINITIONS_DIR / "cpu-mini__rms_norm.toml", broken)
    broken.write_text("difficulty = 'hard'\n" + broken.read_text())
    line = _one_line_error(apex_cli("tasks", "list", env={"APEX_TASK_DIRS": str(tmp_path)}))
    assert str(broken) in line and "difficulty" in line


def test_an_eval_with_a_missing_claude_cli_says_how_to_get_it(apex_cli, tmp_path):
    done = apex_cli("eval", "--output-dir", str(tmp_path / "o"), env={"PATH": "/usr/bin:/bin"})
    assert "npm install -g @anthropic-ai/claude-code" in _one_line_error(done)
    assert not (tmp_path / "o").exists()  # a failed eval leaves no prompt.md behind


def test_grade_reports_progress_on_stderr_and_keeps_stdout_for_the_verdict(apex_cli, tmp_path):
    cache = {"APEX_CACHE_DIR": str(tmp_path / "cache")}
    done = apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", CANNED, "--json", "--no-timing", env=cache)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["outcome"] == "ok"  # nothing but the JSON verdict on stdout
    progress = done.stderr.splitlines()
    assert progress[0] == "grading   0%: starting a worker and loading the solution"
    assert any(line.startswith("grading") and "checking correctness, case 1 of" in line for line in progress)
    table = apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", CANNED, "--no-timing", env=cache)
    assert "not timed: correctness only" in table.stdout and "grading" not in table.stdout


def test_a_device_is_checked_before_a_cached_verdict_is_given(apex_cli, tmp_path):
    cache = {"APEX_CACHE_DIR": str(tmp_path / "cache")}
    assert apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", CANNED, "--no-timing", env=cache).returncode == 0
    line = _one_line_error(apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", CANNED, "--no-timing",
                                    "--device", "0", env=cache))
    assert "is a CPU task" in line


def test_eval_dry_run_keeps_an_edited_solution_unless_told_to_overwrite(apex_cli, tmp_path):
    solution = tmp_path / "output" / "cpu-mini__rms_norm" / "solution.py"
    solution.parent.mkdir(parents=True)
    solution.write_text("def rms_norm(x, weight, eps):\n    return x  # my own\n")
    line = _one_line_error(apex_cli("eval", "--dry-run", "--output-dir", str(tmp_path / "output")))
    assert "already exists and is not the stored solution" in line and "--overwrite" in line
    assert "# my own" in solution.read_text() and not (solution.parent / "prompt.md").exists()
    done = apex_cli("eval", "--dry-run", "--overwrite", "--output-dir", str(tmp_path / "output"))
    assert done.returncode == 0, done.stderr
    assert "# my own" not in solution.read_text()


def test_version_and_short_help_answer_at_every_level_and_a_bare_command_shows_its_help(apex_cli):
    version = apex_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("apex 0.") and "python 3." in version.stdout
    for args in (["-h"], ["tasks", "-h"], ["patch", "restore", "-h"]):
        shown = apex_cli(*args)
        assert shown.returncode == 0 and shown.stdout.startswith("Usage: "), (args, shown.stderr)
    for args in ([], ["tasks"]):
        bare = apex_cli(*args)
        assert bare.returncode == 0 and bare.stdout.startswith("Usage: ") and bare.stderr == "", (args, bare.stderr)



def test_ctrl_c_during_a_grading_is_one_line_and_leaves_no_traceback(tmp_path):
    """Ctrl-C as a terminal sends it: SIGINT to the command's whole process group, mid-grading."""
    import signal

    from tests.conftest import REPO_ROOT as ROOT
    from tests.conftest import interruptible

    sleepy = tmp_path / "sleepy.py"
    sleepy.write_text("import time\ntime.sleep(120)\ndef rms_norm(x, weight, eps):\n    return x\n")
    # faulthandler: a command that ignores the interrupt is made to show where it waits (SIGABRT below)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "APEX_CACHE_DIR": str(tmp_path / "cache"), "PYTHONFAULTHANDLER": "1"}
    child = subprocess.Popen([sys.executable, "-m", "apex_core.cli.main", "grade", "--task", "cpu-mini__rms_norm",
                              "--solution", str(sleepy), "--no-cache"], cwd=tmp_path, env=env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    seen = []
    for line in child.stderr:  # the grading's progress: inside the command, past the imports
        seen.append(line)
        if "loading the solution" in line:
            break
    os.killpg(child.pid, signal.SIGINT)
    try:
        _, rest = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGABRT)
        _, rest = child.communicate(timeout=30)
        pytest.fail("apex grade went on for 60 s after Ctrl-C; where it waited:\n" + rest[-6000:])
    stderr = "".join(seen) + rest
    assert child.returncode == 130 and stderr.strip().splitlines()[-1] == "apex: interrupted", stderr[-2000:]
    assert "Traceback" not in stderr


@pytest.mark.parametrize(("command", "said"), [("run", "apex: interrupted (go on with 'apex run --resume latest')"),
                                               ("grade", "apex: interrupted")])
def test_an_interrupted_command_says_so_in_one_line_and_a_run_how_to_go_on(command, said, monkeypatch, capsys):
    from apex_core.cli import main as cli

    monkeypatch.setattr(cli, "app", lambda **_: 130)  # what typer returns on Ctrl-C
    monkeypatch.setattr(cli, "_recover_patches", lambda: None)
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--workload", "cpu-mini"])
    assert done.value.code == 130 and capsys.readouterr().err == said + "\n"


@pytest.mark.parametrize(("args", "expected"), [
    (["--gpu", "nope"], "unknown GPU arch or product 'nope'"),
    (["--replay-from", "/nonexistent/trajectories"], "--replay-from /nonexistent/trajectories: no trajectory file there"),
])
def test_a_run_refuses_what_would_fail_it_minutes_in_before_a_run_folder_exists(apex_cli, tmp_path, args, expected):
    results = tmp_path / "results"
    done = apex_cli("run", "--workload", "cpu-mini", "--results-dir", str(results), *args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and expected in lines[0], done.stderr[-2000:]
    assert not results.exists()


def test_the_shell_completes_commands_options_and_their_choices(apex_cli):
    script = apex_cli("--show-completion", "bash")
    assert script.returncode == 0 and "_APEX_COMPLETE=complete_bash" in script.stdout

    def complete(words: str) -> list[str]:
        done = apex_cli(env={"_APEX_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)})
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("apex ta") == ["tasks"]
    assert complete("apex run --lang") == ["--languages"]
    assert complete("apex run --agent ") == ["replay", "claude", "codex", "cursor"]
