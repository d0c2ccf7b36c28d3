"""The paired bootstrap: shared keys only, exact intervals where they are known, reproducible draws."""

from factory.bootstrap.paired import paired_difference, scores_digest


def test_constant_differences_have_a_point_interval_and_only_shared_keys_count():
    a = {"q1": 1.0, "q2": 1.0, "q3": 0.0, "extra": 1.0}
    b = {"q1": 0.0, "q2": 0.0, "q3": -1.0}
    d = paired_difference(a, b, samples=500, seed=3)
    assert d == {"n": 3, "difference": 1.0, "ci": [1.0, 1.0]}
    assert paired_difference(a, {}, samples=500, seed=3) == {"n": 0, "difference": None, "ci": [None, None]}


def test_interval_brackets_the_mean_and_draws_are_reproducible():
    a = {f"q{i}": float(i % 3 == 0) for i in range(30)}
    b = {f"q{i}": float(i % 2 == 0) for i in range(30)}
    d = paired_difference(a, b, samples=2000, seed=1, names=("x",))
    assert d["difference"] == (10 - 15) / 30 and d["ci"][0] < d["difference"] < d["ci"][1]
    assert paired_difference(a, b, samples=2000, seed=1, names=("x",)) == d
    assert paired_difference(a, b, samples=2000, seed=1, names=("y",))["ci"] != d["ci"]


def test_digest_names_the_scores():
    assert scores_digest({"a": 1.0, "b": 0.0}) == scores_digest({"b": 0.0, "a": 1.0})
    assert scores_digest({"a": 1.0, "b": 0.0}) != scores_digest({"a": 1.0, "b": 1.0})
