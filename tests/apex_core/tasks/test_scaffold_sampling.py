"""`apex tasks new` for the sampler: Gemma 2's final soft-cap comes from the model, never from the
task the scaffold copied, and a Gemma sampler is copied from a soft-capped one where there is one."""

import sys

from apex_core.tasks import catalog
from apex_core.tasks.catalog import DEFINITIONS_DIR
from apex_core.tasks.scaffold import scaffold_task

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

KERNEL = "top_k_top_p_sampling"


def test_a_gemma_sampler_copied_from_an_uncapped_one_takes_the_models_soft_cap(definitions_without):
    new = definitions_without(f"gemma-2-9b-it__{KERNEL}")  # no soft-capped sibling left to copy
    made = scaffold_task("gemma-2-9b-it", KERNEL, new)
    written = tomllib.loads(made.path.read_text())
    assert written["params"] == {"softcap": "@final_logit_softcapping"}
    assert catalog.get_task(f"gemma-2-9b-it__{KERNEL}").params["softcap"] == 30.0


def test_a_sampler_of_an_uncapped_model_never_inherits_a_soft_cap(definitions_without, monkeypatch):
    new = definitions_without(f"phi-4__{KERNEL}")
    from apex_core.tasks import scaffold

    monkeypatch.setattr(scaffold, "_closest_sibling", lambda kernel, model: (
        f"gemma-2-9b-it__{KERNEL}", tomllib.loads((DEFINITIONS_DIR / f"gemma-2-9b-it__{KERNEL}.toml").read_text())))
    made = scaffold_task("phi-4", KERNEL, new)
    assert "params" not in tomllib.loads(made.path.read_text())
    assert catalog.get_task(f"phi-4__{KERNEL}").params["softcap"] == 0.0


def test_the_soft_cap_decides_which_sampler_a_gemma_task_is_copied_from_and_nothing_else():
    from apex_core.models import get_model
    from apex_core.tasks.scaffold import DECIDING_TRAIT, TRAITS, _likeness

    gemma, gemma_9b, qwen = get_model("gemma-2-27b-it"), get_model("gemma-2-9b-it"), get_model("qwen3-5-27b")
    assert _likeness(gemma, gemma_9b, KERNEL) > _likeness(gemma, qwen, KERNEL)

    def without_kernel_traits(a, b, kernel):
        return 8 * (a.family == b.family) + sum(len(TRAITS) if DECIDING_TRAIT.get(kernel) == name else 1
                                                for name, trait in TRAITS.items() if trait(a) == trait(b))

    for kernel in ("rms_norm", "rope", "prefill_attention", "gemm_bf16"):  # every other kernel's choice is as before
        assert _likeness(gemma, qwen, kernel) == without_kernel_traits(gemma, qwen, kernel)
        assert _likeness(gemma, gemma_9b, kernel) == without_kernel_traits(gemma, gemma_9b, kernel)
