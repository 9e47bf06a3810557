from apex_core.docsearch.chunking import markdown_sections, split_lines

from .conftest import GUIDE_MD


def test_markdown_is_cut_at_headings_and_each_section_keeps_its_heading_path_and_lines():
    sections = markdown_sections(GUIDE_MD)
    assert [s.heading for s in sections] == ["Tiling guide", "Tiling guide > Occupancy", "Tiling guide > Swizzling"]
    occupancy = sections[1].pieces[0]
    assert occupancy.text.startswith("## Occupancy") and "register pressure" in occupancy.text
    lines = GUIDE_MD.splitlines()
    assert lines[occupancy.line_start - 1] == "## Occupancy"
    assert "register pressure" in lines[occupancy.line_end - 1]


def test_a_hash_inside_a_code_fence_is_code_not_a_heading():
    headings = [s.heading for s in markdown_sections(GUIDE_MD)]
    assert not any("this comment" in (h or "") for h in headings)
    assert "pid = tl.program_id(0)" in markdown_sections(GUIDE_MD)[-1].pieces[0].text


def test_text_before_the_first_heading_is_a_section_without_heading_and_an_empty_heading_is_dropped():
    sections = markdown_sections("---\nname: x\n---\n\n# Title\n## Sub\nbody\n")
    assert [(s.heading, s.pieces[0].line_start) for s in sections] == [(None, 1), ("Title > Sub", 6)]


def test_a_long_section_is_split_at_blank_lines_with_overlap_and_its_line_ranges_cover_it():
    paragraphs = [f"paragraph {n} " + "word " * 40 for n in range(12)]
    lines = "\n\n".join(paragraphs).splitlines()
    pieces = split_lines(lines, first_line=10, max_chars=600, overlap_chars=250)
    assert len(pieces) > 2
    assert all(len(p.text) <= 600 + 250 for p in pieces)
    assert pieces[0].line_start == 10 and pieces[-1].line_end == 10 + len(lines) - 1
    for before, after in zip(pieces, pieces[1:]):
        assert after.text.startswith(before.text.split("\n\n")[-1])  # the last paragraph is repeated
        assert after.line_start <= before.line_end


def test_a_single_line_longer_than_a_piece_is_sliced_and_blank_text_gives_nothing():
    pieces = split_lines(["x" * 2500], max_chars=1000)
    assert [len(p.text) for p in pieces] == [1000, 1000, 500]
    assert split_lines(["", "   ", ""]) == []


def test_a_heading_stays_with_the_long_paragraph_after_it():
    text = "# Title\n\n## LDS\n\n" + "The LDS holds tiles. " * 100 + "\n"
    sections = markdown_sections(text, max_chars=600)
    first = sections[0].pieces[0]
    assert first.text.startswith("## LDS\n\nThe LDS holds tiles.")
    assert not any(piece.text.strip() == "## LDS" for section in sections for piece in section.pieces)
