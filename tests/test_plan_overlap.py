"""The overlap model against a step-by-step simulation of one stream next to compute."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.plan.overlap import exposed_s


def simulate_buckets(times: list[float], window: float) -> float:
    """Call k is ready when compute slice k ends; calls run one at a time."""
    n = len(times)
    end = 0.0
    for k, t in enumerate(times, start=1):
        end = max(end, k * window / n) + t
    return max(0.0, end - window)


def simulate_prefetch(times: list[float], window: float) -> float:
    """All calls issued at 0, one at a time; compute slice k starts once call k is done."""
    n = len(times)
    done = compute_end = 0.0
    for t in times:
        done += t
        compute_end = max(compute_end, done) + window / n
    return compute_end - window


@given(
    call=st.floats(0, 10),
    frac=st.floats(0, 1),
    n=st.integers(1, 50),
    window=st.floats(0, 100),
)
def test_matches_bucket_simulation(call, frac, n, window):
    last = call * frac if n > 1 else call
    times = [call] * (n - 1) + [last]
    assert exposed_s(call, last, n, window) == pytest.approx(
        simulate_buckets(times, window), rel=1e-9, abs=1e-9
    )


@given(call=st.floats(0, 10), n=st.integers(1, 50), window=st.floats(0, 100))
def test_equal_calls_prefetch_reads_the_same(call, n, window):
    assert exposed_s(call, call, n, window) == pytest.approx(
        simulate_prefetch([call] * n, window), rel=1e-9, abs=1e-9
    )


def test_hand_examples():
    assert exposed_s(1.0, 1.0, 1, 100.0) == 1.0  # one unbucketed call: all exposed
    assert exposed_s(1.0, 1.0, 10, 100.0) == 1.0  # enough compute: only the last shows
    assert exposed_s(1.0, 1.0, 10, 0.0) == 10.0  # no compute: all of it
    assert exposed_s(3.0, 3.0, 4, 8.0) == pytest.approx(4 * 3 - 3 * 2)  # n t - (n-1) W/n
    assert exposed_s(0.0, 0.0, 0, 1.0) == 0.0
