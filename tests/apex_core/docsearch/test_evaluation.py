from pathlib import Path

import pytest

from apex_core.docsearch import index
from apex_core.docsearch import store
from apex_core.docsearch.corpus import default_units
from apex_core.docsearch.evaluation import EvalItem, answers, evaluate, load_items, missing_answers, percentile
from apex_core.docsearch.models import Chunk
from apex_core.errors import ApexUserError

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
EVAL_SETS = [BENCHMARKS / "docs_eval.jsonl", BENCHMARKS / "docs_eval_heldout.jsonl"]


@pytest.fixture(scope="module")
def default_chunks() -> list[Chunk]:
    units, _ = default_units()
    return [chunk for unit in units for chunk in unit.chunks()]


@pytest.mark.parametrize("path", EVAL_SETS, ids=lambda p: p.name)
def test_every_answer_of_the_evaluation_sets_exists_in_the_default_corpus(path, default_chunks):
    """A renamed heading, a removed fact or a changed docstring breaks this test instead of silently
    lowering the recorded figures."""
    items = load_items(path)
    assert len(items) >= (40 if path.name == "docs_eval.jsonl" else 10)
    installed = {chunk.source.split(":")[0] for chunk in default_chunks if ":" in chunk.source}
    # a package's docstrings can be checked only where it is installed (triton is, in CI)
    checked = [item for item in items if ":" not in item.source or item.source.split(":")[0] in installed]
    missing = missing_answers(checked, default_chunks)
    assert not missing, "\n".join(f"{m.source} > {m.section} ({m.contains!r}): {m.question}" for m in missing)


def test_a_hit_answers_an_item_only_with_the_same_source_section_and_phrase():
    chunk = Chunk(text="Pad  the LDS\nrow by one element.", source="docs/a.md", kind="doc", section="A > Pads")
    assert answers(chunk, EvalItem(question="q", source="docs/a.md", section="A > Pads", contains="pad the lds row"))
    assert not answers(chunk, EvalItem(question="q", source="docs/b.md", section="A > Pads"))
    assert not answers(chunk, EvalItem(question="q", source="docs/a.md", section="A"))
    assert not answers(chunk, EvalItem(question="q", source="docs/a.md", section="A > Pads", contains="swizzle"))


def test_a_malformed_evaluation_line_is_a_user_error_with_its_line_number(tmp_path):
    path = tmp_path / "eval.jsonl"
    path.write_text('// a comment\n{"question": "q", "source": "s"}\n{"question": "q"}\n')
    with pytest.raises(ApexUserError, match=r"eval.jsonl:3: not an evaluation item"):
        load_items(path)


def test_percentiles_interpolate_between_ranks():
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.95) == pytest.approx(4.8)


def test_a_smoke_evaluation_over_the_skills_and_hardware_facts_finds_most_answers(tmp_path, monkeypatch):
    """The full evaluation runs in benchmarks/docs_search_bench.py; here its hardware and skill
    questions, over an index of just the skills, the README and the hardware model."""
    def small_corpus():
        units, skipped = default_units(packages=())
        return [u for u in units if u.kind in ("skill", "hardware") or u.source == "README.md"], skipped

    monkeypatch.setattr(store, "default_units", small_corpus)
    folder = tmp_path / "index"
    index(index_dir=folder)
    items = [item for item in load_items(EVAL_SETS[0])
             if item.source.startswith(("skills/", "apex_core/hardware/")) or item.source == "README.md"]
    assert len(items) >= 15
    report = evaluate(items, k=5, depth=10, index_dir=folder)
    assert report.recall_at_k >= 0.8, [(r.question, r.rank, r.top) for r in report.items if r.rank is None or r.rank > 5]
    assert 0 < report.mrr <= 1 and report.latency_p50_ms > 0
