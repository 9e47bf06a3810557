"""`apex tasks new` gives a model only the norm kernel of its own norm: RMSNorm kernels for RMSNorm
models, the LayerNorm kernel for LayerNorm models (Falcon's norms have a mean and a bias)."""

import pytest

from apex_core.errors import ApexUserError
from apex_core.models import MODELS
from apex_core.tasks import catalog
from apex_core.tasks.families import kernel_defaults
from apex_core.tasks.scaffold import NEEDS_NORM, scaffold_task


@pytest.mark.parametrize(
    ("model", "kernel", "complaint"),
    [
        ("falcon-7b-instruct", "rms_norm", "falcon-7b-instruct normalizes with 'layer' norm, not RMSNorm: rms_norm"),
        ("falcon-7b-instruct", "rms_norm_hip", "not RMSNorm: rms_norm_hip is not a kernel it runs"),
        ("llama-3-1-8b-instruct", "layer_norm", "llama-3-1-8b-instruct normalizes with 'rms' norm, not LayerNorm: layer_norm"),
        ("gemma-2-9b-it", "layer_norm", "not LayerNorm: layer_norm is not a kernel it runs"),
    ],
)
def test_a_norm_kernel_of_the_other_norm_is_refused_in_one_line(tmp_path, model, kernel, complaint):
    with pytest.raises(ApexUserError, match=complaint) as refused:
        scaffold_task(model, kernel, tmp_path)
    assert "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_every_norm_kernel_named_exists_and_every_registry_norm_has_one():
    assert set(NEEDS_NORM) <= set(kernel_defaults())
    assert {norm for norm, _ in NEEDS_NORM.values()} >= {model.norm for model in MODELS.values()}


def test_falcons_layer_norm_scaffolds_and_loads(definitions_without):
    made = scaffold_task("falcon-7b-instruct", "layer_norm", definitions_without("falcon-7b-instruct__layer_norm"))
    task = catalog.get_task("falcon-7b-instruct__layer_norm")
    assert made.solution is not None and made.solution.name == "solution.py"
    assert task.params["eps"] == 1e-5 and task.test_shapes[0]["hidden"] == 4544
