import pytest

from apex_core.docsearch.pdf import pdf_passages
from apex_core.errors import ApexUserError

from .conftest import write_pdf


def test_a_pdf_gives_one_passage_per_page_with_its_page_number_and_outline_title(tmp_path):
    path = write_pdf(tmp_path / "isa.pdf", [["Vector memory loads."], ["MFMA executes on matrix cores."]],
                     outline=[("Vector memory", 0), ("Matrix cores", 1)])
    passages = pdf_passages(path)
    assert [(p.page, p.section) for p in passages] == [(1, "Vector memory"), (2, "Matrix cores")]
    assert "MFMA executes on matrix cores." in passages[1].text


def test_without_an_outline_the_section_is_the_page_label(tmp_path):
    passages = pdf_passages(write_pdf(tmp_path / "plain.pdf", [["one"], ["two"], ["three"]]))
    assert [p.section for p in passages] == ["page 1", "page 2", "page 3"]


def test_a_file_that_is_not_a_pdf_is_a_user_error_naming_it(tmp_path):
    fake = tmp_path / "fake.pdf"
    fake.write_text("this is not a PDF")
    with pytest.raises(ApexUserError, match="fake.pdf: not a readable PDF"):
        pdf_passages(fake)
