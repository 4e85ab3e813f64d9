"""Dollars: the seed's formula, per step, per day and per job."""

import pytest

from ringtree.cost.money import Price, comm_money
from ringtree.errors import RingtreeError


def test_seed_h100_cluster():
    # 31 ms of communication x $30/3600 per GPU-second x 8 GPUs, at 1 step per second
    money = comm_money(28 / 900, Price.per_worker(30, 8))
    assert money.usd_per_step == pytest.approx(28 / 900 * 30 / 3600 * 8)
    assert money.usd_per_step == pytest.approx(2.1e-3, rel=0.02)
    assert money.usd_per_day == pytest.approx(money.usd_per_step * 86400)
    assert money.usd_per_day == pytest.approx(180, rel=0.01)
    assert money.usd_per_job is None and money.usd_comm_per_job is None


def test_seed_grammar_tutor_job():
    # 1 ms x $0.70/3600 per cluster-second; a 3-hour job
    money = comm_money(1e-3, Price.cluster(0.70), hours=3)
    assert money.usd_per_step == pytest.approx(1.944e-7, rel=1e-3)
    assert money.usd_per_job == pytest.approx(2.1)
    assert money.usd_comm_per_job == pytest.approx(1e-3 * 0.70 / 3600 * 3 * 3600)
    assert money.usd_comm_per_job < 0.01  # the seed: << $0.01 in communication


def test_steps_per_second_scale_day_and_job_not_step():
    one = comm_money(0.05, Price.cluster(100), steps_per_second=1, hours=2)
    four = comm_money(0.05, Price.cluster(100), steps_per_second=4, hours=2)
    assert four.usd_per_step == one.usd_per_step
    assert four.usd_per_day == pytest.approx(4 * one.usd_per_day)
    assert four.usd_comm_per_job == pytest.approx(4 * one.usd_comm_per_job)
    assert four.usd_per_job == one.usd_per_job == 200


def test_per_worker_price_is_the_cluster_price_divided():
    assert Price.per_worker(30, 8) == Price.cluster(240)
    assert Price.cluster(36).usd_per_second == pytest.approx(0.01)


@pytest.mark.parametrize(
    "call",
    [lambda: Price.cluster(-1), lambda: comm_money(1, Price.cluster(1), steps_per_second=0),
     lambda: comm_money(1, Price.cluster(1), hours=-2)],
)
def test_bad_money_inputs(call):
    with pytest.raises(RingtreeError):
        call()
