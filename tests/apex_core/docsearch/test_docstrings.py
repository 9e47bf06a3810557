from apex_core.docsearch.docstrings import docstring_passages

from .conftest import KERNELS_PY


def test_each_public_definition_with_a_docstring_is_a_passage_with_name_signature_and_lines():
    passages = {p.qualname: p for p in docstring_passages(KERNELS_PY, "corpus.kernels")}
    assert set(passages) == {"corpus.kernels", "fused_rmsnorm", "TileConfig", "TileConfig.autotune_space"}
    norm = passages["fused_rmsnorm"]
    assert norm.text.startswith("corpus.kernels.fused_rmsnorm(x, weight, eps=1e-06)\n\nRoot-mean-square")
    lines = KERNELS_PY.splitlines()
    assert lines[norm.line_start - 1].startswith("def fused_rmsnorm")
    assert lines[norm.line_end - 1].strip() == "return x"
    assert passages["TileConfig.autotune_space"].text.startswith("corpus.kernels.TileConfig.autotune_space(self, budget)")


def test_a_file_that_does_not_parse_documents_nothing():
    assert docstring_passages("def broken(:\n", "m") == []


def test_a_long_docstring_is_cut_and_every_piece_names_what_it_documents():
    body = "\n\n".join(f"Paragraph {n}: " + "detail " * 60 for n in range(8))
    source = f'def big():\n    """{body}"""\n'
    passages = docstring_passages(source, "m", max_chars=800)
    assert len(passages) > 2 and all(p.text.startswith("m.big()\n\n") for p in passages)
