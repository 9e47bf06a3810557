from apex_core.docsearch.lexical import LexicalIndex, tokenize


def test_names_are_kept_whole_and_split_into_parts_and_stop_words_go():
    assert tokenize("What is num_warps?") == ["num_warps", "num", "warp"]
    assert tokenize("tl.dot of the tile") == ["tl.dot", "tl", "dot", "tile"]
    assert tokenize("gfx950 on MI355X: 256") == ["gfx950", "mi355x", "256"]


def test_a_plural_and_its_singular_are_the_same_token_but_status_and_class_are_not_cut():
    assert tokenize("kernels CUs wavefronts") == tokenize("kernel CU wavefront")
    assert tokenize("status analysis class") == ["status", "analysis", "class"]


def test_the_ranking_puts_the_chunk_with_the_rare_word_first_and_honours_kinds(tmp_path):
    lexical = LexicalIndex.build(["a", "b", "c"], ["doc", "skill", "doc"],
                                 ["swizzle the program id", "occupancy and wavefronts", "swizzle swizzle tiles"])
    assert lexical.ranking("swizzle", 10)[0] == "c"
    assert lexical.ranking("swizzle", 10, ("skill",)) == []
    assert lexical.ranking("nothing matches", 10) == []
    lexical.save(tmp_path / "lex")
    loaded = LexicalIndex.load(tmp_path / "lex")
    assert loaded is not None and loaded.ranking("occupancy", 5) == ["b"]
    assert LexicalIndex.load(tmp_path / "absent") is None
