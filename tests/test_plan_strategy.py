"""Strategy parsing and the dp x tp x pp layout."""

import pytest

from ringtree.errors import RingtreeError
from ringtree.plan.strategy import Layout, parse_strategy


@pytest.mark.parametrize(
    ("text", "gpus", "layout"),
    [
        ("ddp", 64, Layout("ddp", 64, 1, 1)),
        ("zero3", 8, Layout("zero3", 8, 1, 1)),
        ("FSDP", 8, Layout("zero3", 8, 1, 1)),
        ("tp=8", 64, Layout("ddp", 8, 8, 1)),
        ("pp=4", 64, Layout("ddp", 16, 1, 4)),
        ("dp=2,tp=8,pp=4", 64, Layout("ddp", 2, 8, 4)),
        ("zero1, tp=8, sp", 16, Layout("zero1", 2, 8, 1, sp=True)),
    ],
)
def test_parse_and_resolve(text, gpus, layout):
    got = parse_strategy(text).resolve(gpus)
    assert got == layout
    assert got.gpus == gpus


def test_canonical_name():
    assert parse_strategy("pp=2,tp=4,zero1,sp").resolve(16).name == "zero1,tp=4,pp=2,sp"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty item"),
        ("ddp,,tp=2", "empty item"),
        ("zero4", "unknown item 'zero4'"),
        ("tp=0", "tp='0'"),
        ("tp=x", "tp='x'"),
        ("tp=2,tp=4", "tp given twice"),
        ("ddp,zero3", "two data-parallel flavours"),
        ("sp", "needs tp > 1"),
    ],
)
def test_bad_strategies(text, message):
    with pytest.raises(RingtreeError, match=message):
        parse_strategy(text)


def test_gpus_not_divisible_by_tp_pp():
    with pytest.raises(RingtreeError, match="64 GPUs are not divisible by tp x pp = 3 x 2"):
        parse_strategy("tp=3,pp=2").resolve(64)
    with pytest.raises(RingtreeError, match="but there are 64 GPUs"):
        parse_strategy("dp=4,tp=8").resolve(64)
