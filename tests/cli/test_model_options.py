"""`apex run` and `apex optimize-kernel` take RunConfig's settings as RunConfig declares them: every
setting an option, with the model's default, bounds and description; values go back through the
model, so a bad one is the model's verdict on one line, naming the option."""

import typing

import pytest
from typer.testing import CliRunner

from apex_core.cli.main import app, main
from apex_core.cli.model_options import option_help, options_from, settings_from
from apex_core.cli.pipeline import KERNEL_SETTINGS, RUN_SETTINGS
from apex_core.pipeline.config import DEFAULT_SCORE_THRESHOLD, RunConfig
from apex_core.score import INTEGRATION_THRESHOLD


def _help(*command: str) -> str:
    done = CliRunner().invoke(app, [*command, "--help"], terminal_width=400)
    assert done.exit_code == 0, done.output
    return " ".join(done.output.split())


def test_every_setting_but_the_task_list_is_an_option_of_apex_run_with_the_models_description():
    text = _help("run")
    assert set(RUN_SETTINGS) == set(RunConfig.model_fields) - {"tasks"}
    for name in RUN_SETTINGS:
        info = RunConfig.model_fields[name]
        assert f"--{name.replace('_', '-')}" in text
        assert " ".join(option_help(info).split()) in text, name


def test_the_defaults_shown_are_the_models_own_constants():
    text = _help("run")
    assert f"--min-speedup <float> {option_help(RunConfig.model_fields['min_speedup'])} [default: {INTEGRATION_THRESHOLD}]" in text
    assert f"[default: {DEFAULT_SCORE_THRESHOLD}]" in text
    assert "--languages <str>" in text and "--kernel-types" not in text


def test_optimize_kernel_takes_the_agent_loops_settings_and_no_workloads():
    text = _help("optimize-kernel")
    for name in KERNEL_SETTINGS:
        assert f"--{name.replace('_', '-')} " in text
    for name in ("workload", "kernels", "top_k", "languages", "runs", "final_pairs"):
        assert f"--{name.replace('_', '-')} " not in text


def test_bounds_and_choices_are_written_into_the_help():
    assert option_help(RunConfig.model_fields["top_k"]) == "Bottleneck kernels to optimize (1-50)."
    assert option_help(RunConfig.model_fields["score_threshold"]).endswith("(> 0).")
    assert "(comma-separated: liger, fla)" in option_help(RunConfig.model_fields["kernels"])


def test_a_setting_without_a_description_cannot_become_an_option():
    from pydantic import BaseModel

    class Undocumented(BaseModel):
        depth: int = 3

    with pytest.raises(TypeError, match="description"):
        options_from(Undocumented, ["depth"])


def test_comma_lists_become_tuples_and_empty_options_leave_the_models_default():
    settings = settings_from(RunConfig, {"workload": "cpu-mini", "kernels": None, "languages": "triton, hip", "layers": None})
    assert settings == {"workload": "cpu-mini", "languages": ("triton", "hip"), "layers": None}
    config = RunConfig(**settings)
    assert config.kernels == () and config.languages == ("hip", "triton")


def test_a_list_option_is_text_on_the_command_line_and_optional_where_the_model_has_no_default():
    parameters = {p.name: p for p in options_from(RunConfig, ["workload", "kernels"], defaults={"workload": None})}
    assert parameters["workload"].default is None
    assert typing.get_args(parameters["kernels"].annotation)[0] == typing.Optional[str]


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--languages", "cobol", "--languages: Input should be 'triton', 'hip', 'python' or 'all' (got 'cobol')"),
    ("--kernels", "ligr", "--kernels: Input should be 'liger' or 'fla' (got 'ligr')"),
    ("--top-k", "0", "--top-k: Input should be greater than or equal to 1"),
    ("--executor", "slurm", "Invalid value for '--executor'"),
])
def test_a_bad_setting_is_one_line_naming_its_option_before_any_run_folder_exists(tmp_path, capsys, option, value, message):
    with pytest.raises(SystemExit) as done:
        main(["run", "--workload", "cpu-mini", option, value, "--results-dir", str(tmp_path)])
    error = capsys.readouterr().err
    assert done.value.code == 2 and message in error, error
    assert len(error.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_a_run_started_before_the_rename_resumes_with_its_kernel_types():
    config = RunConfig.model_validate({"workload": "cpu-mini", "kernel_types": ["python"]})
    assert config.languages == ("python",) and "languages" in config.model_dump()
