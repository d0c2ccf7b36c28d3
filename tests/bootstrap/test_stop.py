"""The stop rule on hand-made per-question EM vectors: clear gain, gain inside the noise, exactly
min_delta, patience running out, a skipped round (threshold and paired bootstrap tests)."""

import json

import pytest

from factory.bootstrap.stop import decide
from factory.utils.errors import FactoryError
from tests.bootstrap.evals import em
from tests.bootstrap.evals import rule as bootstrap_rule


def rule(max_rounds=5, **kw):
    return bootstrap_rule(
        max_rounds, **{"min_delta": 0.0, "patience": 1, "stop_test": "paired_bootstrap", **kw}
    )


BASE_12 = em("110000000000")  # 2 of 12 held-out questions right
CLEAR = em("111111111100")  # keeps both and gains 8: a clear gain
NOISE = em("111100000000")  # keeps both and gains 2: within the noise of 12 questions


def test_clear_gain_improves_under_both_tests():
    for test in ("threshold", "paired_bootstrap"):
        d = decide(BASE_12, [CLEAR], rule(stop_test=test))
        assert (d.stop, d.best_round, d.best_em, d.history) == (False, 0, 10 / 12, [10 / 12])
        t = d.test
        assert t["improved"] and t["against"] == -1 and t["n"] == 12
        assert t["difference"] == 8 / 12 and 0 < t["ci"][0] < 8 / 12 < t["ci"][1] <= 1
        assert d.tests == [t]


def test_gain_inside_the_noise_counts_only_under_the_threshold_test():
    d = decide(BASE_12, [NOISE], rule(stop_test="threshold"))
    assert d.test["improved"] and d.best_round == 0 and not d.stop
    d = decide(BASE_12, [NOISE], rule())
    # two wins, no loss: a resample misses both with probability (10/12)^12 = 0.11 > 0.025, so the
    # interval's lower bound is exactly 0: no progress, and with patience 1 the chain stops
    assert d.test["difference"] == 2 / 12 and d.test["ci"][0] == 0.0 and d.test["ci"][1] > 2 / 12
    assert not d.test["improved"] and d.best_round == -1 and d.best_em == 2 / 12
    assert d.test["rises"] and not d.test["ci_above_zero"]
    assert d.stop and "95% paired bootstrap CI above 0" in d.reason and "patience 1" in d.reason
    # wins and losses that cancel out to a small rise are noise too
    mixed = em("001111000000")  # loses both base questions, gains 4
    assert decide(BASE_12, [mixed], rule(stop_test="threshold")).test["improved"]
    assert decide(BASE_12, [mixed], rule()).test["ci"][0] < 0


def test_a_rise_of_exactly_min_delta_counts():
    base = {f"q{i:03d}": float(i < 10) for i in range(100)}  # EM 0.10
    better = {f"q{i:03d}": float(i < 15) for i in range(100)}  # EM 0.15: five wins, no loss
    assert 0.15 - 0.10 < 0.05  # floats: a strict comparison calls this no gain
    for test in ("threshold", "paired_bootstrap"):
        d = decide(base, [better], rule(min_delta=0.05, stop_test=test))
        assert d.test["improved"] and d.best_round == 0 and not d.stop
        assert not decide(base, [better], rule(min_delta=0.06, stop_test=test)).test["improved"]
    # a paired interval above 0 is not enough without the rise
    d = decide(BASE_12, [CLEAR], rule(min_delta=0.7))
    assert d.test["ci"][0] > 0 and not d.test["improved"]


def test_no_rise_is_no_progress_even_at_min_delta_zero():
    for test in ("threshold", "paired_bootstrap"):
        d = decide(BASE_12, [dict(BASE_12)], rule(stop_test=test))
        assert not d.test["improved"] and d.test["ci"] == [0.0, 0.0] and d.stop


def test_patience_runs_out_after_rounds_without_progress():
    r = rule(patience=2)
    d = decide(BASE_12, [NOISE], r)
    assert not d.stop and d.stale_rounds == 1
    d = decide(BASE_12, [NOISE, NOISE], r)
    assert d.stop and d.stale_rounds == 2 and "for 2 round(s) (patience 2)" in d.reason and d.best_round == -1
    # progress resets the count; later rounds are compared with the best round, not the previous one
    d = decide(BASE_12, [NOISE, CLEAR, NOISE], r)
    assert not d.stop and d.best_round == 1 and d.stale_rounds == 1
    assert [t["against"] for t in d.tests] == [-1, -1, 1]
    assert d.tests[2]["difference"] == -6 / 12 and d.tests[2]["ci"][1] < 0
    d = decide(BASE_12, [NOISE, CLEAR, NOISE, CLEAR], r)
    assert d.stop and d.best_round == 1 and d.history == [4 / 12, 10 / 12, 4 / 12, 10 / 12]


def test_a_skipped_round_keeps_the_chain_stopped():
    d = decide(BASE_12, [CLEAR, NOISE, None], rule())
    assert d.stop and d.best_round == 0 and d.history == [10 / 12, 4 / 12, None]
    assert d.tests[2] is None and d.test is None and "patience 1" in d.reason
    assert d.stale_rounds == 1  # a skipped round is not a round without progress


def test_improving_chain_continues_until_max_rounds():
    chain = [em("111000000000"), em("111110000000"), em("111111100000")]
    d = decide(em("100000000000"), chain[:1], rule(stop_test="threshold", max_rounds=3))
    assert (d.stop, d.best_round) == (False, 0)
    d = decide(em("100000000000"), chain, rule(stop_test="threshold", max_rounds=3))
    assert d.stop and "max_rounds (3)" in d.reason and d.best_round == 2


def test_chain_start_with_max_rounds_one():
    d = decide(BASE_12, [], rule(max_rounds=1))
    assert not d.stop and d.tests == [] and d.test is None and d.base_em == 2 / 12
    assert decide(BASE_12, [CLEAR], rule(max_rounds=1)).stop


def test_paired_test_needs_the_same_questions():
    with pytest.raises(FactoryError, match="different held-out questions"):
        decide(BASE_12, [em("1111")], rule())


def test_decisions_are_deterministic_and_record_what_they_compared():
    a = decide(BASE_12, [NOISE, CLEAR], rule(patience=2)).as_dict()
    b = decide(BASE_12, [NOISE, CLEAR], rule(patience=2)).as_dict()
    assert json.dumps(a) == json.dumps(b)
    other = dict(CLEAR, q11=1.0)
    c = decide(BASE_12, [NOISE, other], rule(patience=2)).as_dict()
    assert c["tests"][1]["digest"] != a["tests"][1]["digest"]
    assert decide(BASE_12, [NOISE], rule(ci_seed=1)).test["ci"][1] != 0
