"""Best-fit decreasing packing: the packer against a brute force that restates its rule, the
pieces of long documents by hand, and the plan a real corpus gets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import planning
from winsample.planning import best_fit, plan_best_fit


def brute_best_fit(lengths: list[int], span: int) -> list[int]:
    """The rule, one item at a time: decreasing length (ties by item number); the open window with
    the least room that holds the item (ties: lowest number); else a new window."""
    rooms: list[int] = []
    out = [0] * len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        fits = [w for w, r in enumerate(rooms) if r >= lengths[i]]
        if fits:
            w = min(fits, key=lambda w: (rooms[w], w))
        else:
            rooms.append(span)
            w = len(rooms) - 1
        rooms[w] -= lengths[i]
        out[i] = w
    return out


def test_span_10_lengths_6_5_4_3_2_pack_into_two_full_windows():
    # 6 opens w0 (room 4); 5 opens w1 (room 5); 4 fits w0 exactly (least room 4 >= 4);
    # 3 goes to w1 (room 5 -> 2); 2 fills w1. Both windows full: 20 tokens in 2 × 10.
    assert best_fit([6, 5, 4, 3, 2], 10).tolist() == [0, 1, 0, 1, 1]


def test_ties_go_to_the_lowest_numbered_window():
    # four items of 4 in span 10: w0 takes two (room 2), w1 takes two; then the 2s: w0 first
    assert best_fit([4, 4, 4, 4, 2, 2], 10).tolist() == [0, 0, 1, 1, 0, 1]


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 40).flatmap(lambda span: st.tuples(st.just(span), st.lists(st.integers(1, span), max_size=80))))
def test_best_fit_matches_the_rule_item_by_item(case):
    span, lengths = case
    assert best_fit(lengths, span).tolist() == brute_best_fit(lengths, span)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 3), max_size=200), st.integers(3, 9))
def test_many_equal_small_items_match_the_rule(lengths, span):
    # long runs of one length exercise the group step (a window taking several items in a row)
    assert best_fit(lengths, span).tolist() == brute_best_fit(lengths, span)


def test_a_long_document_is_split_into_span_pieces_every_token_once():
    # documents [0, 25) [25, 28) [28, 28) [28, 38); span 10: 25 → 10 + 10 + 5; the empty one gives nothing
    starts, lengths, docs, counts = planning.bestfit.pieces([0, 25, 28, 28], [25, 28, 28, 38], 10, "split")
    assert starts.tolist() == [0, 10, 20, 25, 28]
    assert lengths.tolist() == [10, 10, 5, 3, 10]
    assert docs.tolist() == [0, 0, 0, 1, 3]
    assert counts["documents_split"] == 1 and counts["tokens_dropped"] == 0


def test_truncate_keeps_the_first_span_tokens_and_drop_leaves_the_document_out():
    _, lengths, docs, counts = planning.bestfit.pieces([0, 25], [25, 28], 10, "truncate")
    assert lengths.tolist() == [10, 3] and docs.tolist() == [0, 1]
    assert counts["documents_truncated"] == 1 and counts["tokens_truncated"] == 15
    _, lengths, docs, counts = planning.bestfit.pieces([0, 25], [25, 28], 10, "drop")
    assert lengths.tolist() == [3] and docs.tolist() == [1]
    assert counts["documents_dropped"] == 1 and counts["tokens_dropped"] == 25


def test_plan_rows_are_segments_sorted_by_window_then_start():
    # docs of 6, 5, 4, 3, 2 tokens back to back in span 10 (as in the hand example above)
    ends = np.cumsum([6, 5, 4, 3, 2])
    rows, counts = plan_best_fit(ends - [6, 5, 4, 3, 2], ends, 10)
    assert rows.dtype == planning.PACKED_DTYPE
    assert rows["window"].tolist() == [0, 0, 1, 1, 1]
    assert rows["start"].tolist() == [0, 11, 6, 15, 18]  # doc 0 and doc 2; docs 1, 3, 4
    assert rows["doc"].tolist() == [0, 2, 1, 3, 4]
    assert counts["padding_tokens"] == 0


def test_a_lone_one_token_window_is_left_out_with_targets():
    # span 2: items 2, 2, 1 → windows {2}, {2}, {1}; the last holds no (x, y) pair
    rows, counts = plan_best_fit([0, 2, 4], [2, 4, 5], 2, targets=True)
    assert rows["window"].tolist() == [0, 1] and counts["tokens_dropped"] == 1
    rows, _ = plan_best_fit([0, 2, 4], [2, 4, 5], 2, targets=False)
    assert rows["window"].tolist() == [0, 1, 2]


def test_unknown_long_mode_is_refused():
    with pytest.raises(Exception, match="--long must be one of"):
        planning.bestfit.pieces([0], [5], 3, "wrap")


def test_a_million_real_length_documents_fill_more_than_99_percent():
    # lengths of documents shaped like real text (many short, a long tail), span 2049
    rng = np.random.default_rng(0)
    L = np.clip(rng.lognormal(5.0, 1.1, size=1_000_000).astype(np.int64), 1, 2049)
    w = best_fit(L, 2049)
    windows = int(w.max()) + 1
    assert np.bincount(w, weights=L).max() <= 2049  # no window over the span
    assert L.sum() / (windows * 2049) > 0.99
