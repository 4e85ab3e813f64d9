"""The driver's scheduling: time-budgeted call counts and interleaved rounds."""

from __future__ import annotations

from ringtree.measure.worker import iteration_counts, round_order, schedule_rounds


def test_call_counts_fill_the_budget_within_the_bounds():
    cfg = {"iters": None, "budget_s": 2.0, "min_iters": 5, "max_iters": 200}
    # a round of a cell's algorithms takes 1 ms, 50 ms, 1 s
    assert iteration_counts(cfg, [1e-3, 0.05, 1.0]) == [200, 40, 5]
    assert iteration_counts({**cfg, "iters": 7}, [1e-3, 1.0]) == [7, 7]


def test_rounds_give_each_cell_its_calls_spread_over_the_run():
    iters = [10, 5, 1, 3]
    rounds = schedule_rounds(iters)
    assert len(rounds) == 10
    for c, k in enumerate(iters):
        where = [i for i, r in enumerate(rounds) if c in r]
        assert len(where) == k
        if k > 1:  # evenly spread: gaps differ by at most one round
            gaps = [b - a for a, b in zip(where, where[1:], strict=False)]
            assert max(gaps) - min(gaps) <= 1 and where[0] == 0
    assert schedule_rounds([]) == []


def test_every_algorithm_takes_every_place_in_a_cell_over_the_rounds():
    firsts = set()
    for k in range(5):
        calls = round_order([0, 1], [5, 5], k)
        assert sorted(calls) == [(c, j) for c in (0, 1) for j in range(5)]
        firsts.add(next(j for c, j in calls if c == 0))
    assert firsts == set(range(5))
