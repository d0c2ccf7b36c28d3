"""The bootstrap statistics: paired differences over shared keys only, exact intervals where they are known,
reproducible draws that do not change under the published CIs."""

from factory.utils.stats import QUESTIONS, TRAJECTORIES, paired_difference, scores_digest, seeded_rng


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


def test_each_stream_keeps_its_draws():
    # Every CI in the reports and metrics is drawn from these generators: a changed stream name, seeding
    # or draw shows here first (the values are those of the two modules the streams come from).
    assert seeded_rng(TRAJECTORIES, 0, "all", "paragraph").integers(0, 1000, 6).tolist() == [
        352,
        26,
        570,
        281,
        552,
        399,
    ]
    assert seeded_rng(QUESTIONS, 0, 1, -1).integers(0, 1000, 6).tolist() == [709, 981, 85, 275, 158, 112]
