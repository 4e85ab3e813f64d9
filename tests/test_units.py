"""Parsing and printing of sizes, times, bandwidths, parameter counts and money."""

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ringtree.units as units
from ringtree.errors import RingtreeError
from ringtree.units import (
    figure,
    format_bandwidth,
    format_overhead,
    format_params,
    format_percent,
    format_time,
    format_usd,
    parse_bandwidth,
    parse_params,
    parse_size,
    parse_time,
)


def test_doctests():
    assert doctest.testmod(units).failed == 0


@pytest.mark.parametrize(
    "text, seconds",
    [("200ms", 0.2), ("1.5s", 1.5), ("5us", 5e-6), ("5µs", 5e-6), ("100ns", 1e-7),
     ("2min", 120), ("3h", 10800), ("0.25", 0.25), (" 1 ms ", 1e-3), ("1e3us", 1e-3)],
)
def test_parse_time(text, seconds):
    assert parse_time(text) == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize(
    "text, bps",
    [("900GB/s", 900e9), ("450 GB/s", 450e9), ("200Gb/s", 25e9), ("100Gbps", 12.5e9),
     ("1.25GB/s", 1.25e9), ("12GiB/s", 12 * 2**30), ("10Gbit/s", 1.25e9), ("64MB/s", 64e6),
     ("1000", 1000.0), ("2.8 GB/s", 2.8e9)],
)
def test_parse_bandwidth(text, bps):
    assert parse_bandwidth(text) == pytest.approx(bps, rel=1e-12)


@pytest.mark.parametrize(
    "text, count",
    [("7e9", 7 * 10**9), ("7B", 7 * 10**9), ("500k", 500_000), ("1.5M", 1_500_000),
     ("175b", 175 * 10**9), ("1.2T", 1_200_000_000_000), ("123", 123), (64, 64)],
)
def test_parse_params(text, count):
    assert parse_params(text) == count


@pytest.mark.parametrize(
    "text, size",
    [("4K", 4096), ("4k", 4096), ("64M", 1 << 26), ("8G", 8 << 30), ("1T", 1 << 40),
     ("4KB", 4000), ("14GB", 14 * 10**9), ("4KiB", 4096), ("4Ki", 4096), ("1.5K", 1536),
     ("8", 8)],
)
def test_a_bare_letter_is_binary_as_nccl_tests_reads_it_with_b_decimal(text, size):
    """nccl-tests' parsesize: 'We use the binary system, so M=Mebibytes and G=Gibibytes'."""
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["12XB", "-5GB", "fast", "", "1.5", "GB", "5 G B"])
def test_malformed_sizes(text):
    with pytest.raises(RingtreeError) as e:
        parse_size(text)
    assert "\n" not in str(e.value) and repr(text) in str(e.value)


@pytest.mark.parametrize("text", ["fast", "-5ms", "12XB", "5 parsecs", "ms", ""])
def test_malformed_times(text):
    with pytest.raises(RingtreeError, match="time"):
        parse_time(text)


@pytest.mark.parametrize("text", ["fast", "-5GB/s", "12XB", "0GB/s", "900GB", "9Gb", "GB/s"])
def test_malformed_bandwidths(text):
    with pytest.raises(RingtreeError, match="bandwidth"):
        parse_bandwidth(text)


@pytest.mark.parametrize("text", ["fast", "-7B", "0", "1.5", "7X", "0.5"])
def test_malformed_params(text):
    with pytest.raises(RingtreeError, match="parameter count"):
        parse_params(text)


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["GB/s", "Gb/s", "MB/s"]))
def test_bits_are_an_eighth_of_bytes(n, unit):
    bps = parse_bandwidth(f"{n}{unit}")
    assert bps == pytest.approx(n * {"GB/s": 1e9, "Gb/s": 1e9 / 8, "MB/s": 1e6}[unit])


@pytest.mark.parametrize(
    "x, rounded",
    [(437.5, 440), (22.4, 22), (1.12, 1.12), (31.111, 31), (179.2, 180), (1.944e-7, 1.9e-7),
     (2.074e-3, 2.1e-3), (15.556, 16), (560, 560), (1.234, 1.2), (0, 0)],
)
def test_figure_rounds_the_seeds_way(x, rounded):
    assert figure(x) == pytest.approx(rounded, rel=1e-12)


def test_seed_times_are_printed_as_the_seed_prints_them():
    # 28 GB at 900 GB/s, 64 GB/s, 25 GB/s and 1.25 GB/s (the seed's four links)
    assert format_time(28 / 900) == "31 ms (31.11)"
    assert format_time(28 / 64) == "440 ms (437.5)"
    assert format_time(28 / 25) == "1.12 s"
    assert format_time(28 / 1.25) == "22 s (22.4)"
    assert format_time(1e-3) == "1 ms"
    assert format_time(5e-6) == "5 us"
    assert format_time(0) == "0 s"
    assert format_time(28 / 64, exact=False) == "440 ms"


def test_seed_percentages_and_dollars():
    assert format_percent(28 / 64 / 0.2) == "220 % (218.8)"
    assert format_percent(28 / 25 / 0.2) == "560 %"
    assert format_percent(28 / 900 / 0.2) == "16 % (15.56)"


def test_overhead_the_seeds_way():
    """The seed divides its printed times by 200 ms: 31/200 = 15 %, 440/200 = 220 %."""
    assert format_overhead(28 / 900, 0.2) == "15 % (15.56)"
    assert format_overhead(28 / 64, 0.2) == "220 % (218.8)"
    assert format_overhead(28 / 25, 0.2) == "560 %"
    assert format_overhead(28 / 1.25, 0.2) == "11,000 % (11,200)"
    assert format_usd(28 / 900 * 30 / 3600 * 8) == "$2.1e-3 (2.074e-3)"
    assert format_usd(28 / 900 * 30 / 3600 * 8 * 86400) == "$180 (179.2)"
    assert format_usd(1e-3 * 0.70 / 3600) == "$1.9e-7 (1.944e-7)"
    assert format_usd(0.70 * 3) == "$2.1"
    assert format_usd(12_345.6, exact=False) == "$12,000"
    assert format_usd(0.25) == "$0.25"


def test_format_bandwidth_and_params():
    assert format_bandwidth(900e9) == "900 GB/s"
    assert format_bandwidth(1.25e9) == "1.25 GB/s"
    assert format_bandwidth(1800e9) == "1800 GB/s"
    assert format_bandwidth(130e6) == "130 MB/s"
    assert [format_params(n) for n in (7 * 10**9, 500_000, 1_500_000, 12)] == [
        "7B", "500k", "1.5M", "12"
    ]


@given(st.floats(min_value=1e-9, max_value=1e6, allow_nan=False))
def test_printed_time_round_trips_to_its_figure(seconds):
    text = format_time(seconds, exact=False)
    assert parse_time(text.replace(" ", "").replace(",", "")) == pytest.approx(
        figure(seconds), rel=1e-9
    )


def test_sizes_are_exact_and_at_most_two_to_the_sixty():
    assert parse_size("9007199254740993") == 9007199254740993  # not rounded through a float
    assert parse_size("1e18") == 10**18 and parse_size(str(2**60)) == 2**60
    assert parse_size("0e-999999999") == 0
    for text in (str(2**60 + 1), "1e19", "1e30", "1e400", "1e999999999", 2**63):
        with pytest.raises(RingtreeError, match=r"too large: at most 2\*\*60"):
            parse_size(text)
    for text in ("4096.0000000000000000000000000001", "1e-50"):
        with pytest.raises(RingtreeError, match="not a whole number"):
            parse_size(text)
    assert parse_params("1.5T") == 1_500_000_000_000
    with pytest.raises(RingtreeError, match="too large"):
        parse_params("1e30")


@pytest.mark.parametrize("text", ["1e400s", "1e8s", "400000h"])
def test_times_are_at_most_a_year(text):
    with pytest.raises(RingtreeError, match="at most a year"):
        parse_time(text)


@pytest.mark.parametrize("text", ["1e400GB/s", "1e-300B/s", "0.5B/s", "1001TB/s"])
def test_bandwidths_stay_where_times_are_finite(text):
    with pytest.raises(RingtreeError, match="out of range"):
        parse_bandwidth(text)
