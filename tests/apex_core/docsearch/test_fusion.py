import pytest

from apex_core.docsearch.fusion import RRF_K, reciprocal_rank_fusion


def test_the_fused_score_is_the_sum_of_one_over_k_plus_rank_over_the_legs():
    fused = {f.id: f for f in reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60)}
    assert fused["a"].score == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"].score == pytest.approx(1 / 62)
    assert fused["c"].score == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"].ranks == (2, None) and fused["c"].ranks == (3, 1)


def test_a_document_both_legs_like_beats_one_that_only_one_leg_puts_first():
    order = [f.id for f in reciprocal_rank_fusion([["solo", "both"], ["both", "other"]])]
    assert order[0] == "both"


def test_ties_keep_the_order_in_which_documents_were_first_met_and_repeats_count_once():
    order = reciprocal_rank_fusion([["x", "y", "x"], ["y", "x"]])
    assert [f.id for f in order] == ["x", "y"]
    assert order[0].score == pytest.approx(1 / 61 + 1 / 62)


def test_empty_rankings_fuse_to_nothing_and_a_negative_constant_is_refused():
    assert reciprocal_rank_fusion([[], []]) == []
    assert RRF_K == 60
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], k=-1)
