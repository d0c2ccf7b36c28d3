"""`factory variants` on a small tmp dir: files, accumulation, determinism, skipped/empty rounds, gates."""

from __future__ import annotations

import json

import pytest

from factory.backtrace.authors_rule import authors_rule
from factory.backtrace.rows import labels_index
from factory.cli import main
from factory.params.config import Params
from factory.stages import s08_variants
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.variants.registry import select_units
from schemas import read_rows, write_parquet
from tests.variants.test_sets import make_labels, make_trajectory
from validators import GateFailed


@pytest.fixture(scope="module")
def question_pool(ingested):
    qs = [q for q in ingested.questions if q["dataset"] == "hotpotqa"]
    train = [q for q in qs if q["split"] == "train"][:6]
    heldout = next(q for q in qs if q["split"] == "heldout")
    test = next(q for q in qs if q["split"] == "test")
    return {"train": train, "heldout": heldout, "test": test, "all": train + [heldout, test]}


def _traj(q: dict, variant: str, round_: int, correct: bool = True, **kw) -> dict:
    tid = f"{variant}/seed_0/round_{round_}/{q['question_id']}/k0"
    return make_trajectory(
        tid,
        q["question_id"],
        question=kw.pop("question", q["question"]),
        correct=correct,
        answer=q["answers"][0] if correct else "nobody",
        answers=tuple(q["answers"]),
        round_=round_,
        **kw,
    )


def _write_round(variant: str, round_: int, trajectories: list[dict]) -> None:
    labels = []
    for t in trajectories:
        trips = [x["triplet_id"] for x in t["triplets"]]
        for mode, target, kept in (
            ("undirected_shortest", "thought_and_answer", trips[:2]),
            ("directed_reach", "answer_only", trips[-1:]),
        ):
            labels.append(make_labels(t, kept, mode, target))
    write_parquet(trajectories, paths.trajectories(variant, round_, 0), "trajectory")
    write_parquet(labels, paths.labels(variant, round_, 0), "labels")


@pytest.fixture
def workdir(tmp_path, monkeypatch, question_pool):
    monkeypatch.chdir(tmp_path)
    write_parquet(question_pool["all"], paths.QUESTIONS, "question")
    return tmp_path


def _cli(variant: str, round_: int, *sets: str) -> int:
    argv = ["variants", "--variant", variant, "--round", str(round_)]
    for s in sets:
        argv += ["--set", s]
    return main(argv)


def test_three_variants_two_rounds_accumulate(workdir, question_pool):
    train = question_pool["train"]
    for v in ("backtrace", "random", "unfiltered"):
        _write_round(v, 0, [_traj(q, v, 0) for q in train[:3]] + [_traj(train[3], v, 0, correct=False)])
        assert _cli(v, 0) == 0
    stats = {
        v: json.loads((paths.supervision_dir(v, 0) / "stats.json").read_text())
        for v in ("backtrace", "random", "unfiltered")
    }
    for v, st in stats.items():
        assert (st["status"], st["trajectories"], st["correct"], st["accumulated_rounds"]) == (
            "ok",
            4,
            3,
            [0],
        )
        rows = read_rows(paths.supervision_dir(v, 0) / "train.parquet")
        lines = (paths.supervision_dir(v, 0) / "train.jsonl").read_text().splitlines()
        assert len(rows) == len(lines) == st["examples"] == st["examples_in_set"]
        assert json.loads(lines[0]) == {"messages": rows[0]["messages"]}
        assert {r["variant"] for r in rows} == {v} and {r["round"] for r in rows} == {0}
        assert json.loads(paths.stage_metrics("variants", v, 0).read_text()) == st
        assert st["expectations_passed"] > 0
    # the random control removes exactly what backtracing removes; unfiltered removes nothing
    assert stats["random"]["units"] == stats["backtrace"]["units"]
    assert stats["unfiltered"]["units"]["removed"] == 0
    assert stats["backtrace"]["examples"] < stats["unfiltered"]["examples"]
    assert stats["backtrace"]["seed"] == Params().variants.seed
    # round 1: its own examples plus round 0's
    _write_round("backtrace", 1, [_traj(q, "backtrace", 1) for q in train[4:6]])
    assert _cli("backtrace", 1) == 0
    st2 = json.loads((paths.supervision_dir("backtrace", 1) / "stats.json").read_text())
    rows2 = read_rows(paths.supervision_dir("backtrace", 1) / "train.parquet")
    assert (
        st2["accumulated_rounds"] == [0, 1]
        and st2["examples_in_set"] == stats["backtrace"]["examples"] + st2["examples"]
    )
    assert sorted({r["round"] for r in rows2}) == [0, 1]
    # without accumulation only the round's own examples
    assert _cli("backtrace", 1, "variants.accumulate=false") == 0
    rows2 = read_rows(paths.supervision_dir("backtrace", 1) / "train.parquet")
    assert {r["round"] for r in rows2} == {1}


def test_the_set_records_what_it_kept_and_the_authors_rule_is_a_variant(workdir, question_pool):
    train = question_pool["train"]
    for v in ("random", "authors_rule"):
        _write_round(v, 0, [_traj(q, v, 0) for q in train[:3]] + [_traj(train[3], v, 0, correct=False)])
        assert _cli(v, 0) == 0
        correct = sorted(
            (t for t in read_rows(paths.trajectories(v, 0, 0)) if t["correct"]),
            key=lambda t: t["trajectory_id"],
        )
        labels = labels_index(read_rows(paths.labels(v, 0, 0)), "undirected_shortest", "thought_and_answer")
        rows = read_rows(paths.supervision_dir(v, 0) / paths.KEPT)
        assert [r["trajectory_id"] for r in rows] == [t["trajectory_id"] for t in correct]
        for row, t in zip(rows, correct):
            drawn = select_units(t, labels[t["trajectory_id"]], v, Params().variants.seed)  # the set's draw
            assert (row["variant"], row["kept_triplet_ids"], row["kept_step_indices"]) == (
                v,
                list(drawn.triplet_ids),
                list(drawn.step_indices),
            )
            if v == "authors_rule":
                assert set(row["kept_triplet_ids"]) == authors_rule(t)["kept_triplet_ids"]
    stats = json.loads((paths.supervision_dir("authors_rule", 0) / "stats.json").read_text())
    assert stats["status"] == "ok" and stats["examples"] > 0


def test_outputs_are_byte_identical_on_rerun(workdir, question_pool):
    _write_round("random", 0, [_traj(q, "random", 0) for q in question_pool["train"][:4]])
    out = paths.supervision_dir("random", 0)
    assert _cli("random", 0) == 0
    first = {
        f: (out / f).read_bytes() for f in ("train.parquet", "train.jsonl", "kept.parquet", "stats.json")
    }
    assert _cli("random", 0) == 0
    assert first == {f: (out / f).read_bytes() for f in first}


def test_skipped_and_empty_rounds_are_recorded_outcomes(workdir, question_pool):
    write_parquet([], paths.trajectories("backtrace", 0, 0), "trajectory")
    st = s08_variants.run(Params(), "backtrace", 0)
    assert st["status"] == "skipped" and st["examples_in_set"] == 0
    assert read_rows(paths.supervision_dir("backtrace", 0) / "train.parquet") == []
    assert (paths.supervision_dir("backtrace", 0) / "train.jsonl").read_text() == ""
    # a round after a stop decision records the decision's reason
    write_parquet([], paths.trajectories("backtrace", 1, 0), "trajectory")
    paths.decision("backtrace", 0, 0).parent.mkdir(parents=True, exist_ok=True)
    paths.decision("backtrace", 0, 0).write_text(
        json.dumps({"stop": True, "reason": "held-out EM did not improve"})
    )
    st = s08_variants.run(Params(), "backtrace", 1)
    assert (st["status"], st["reason"], st["examples_in_set"]) == (
        "skipped",
        "held-out EM did not improve",
        0,
    )
    _write_round(
        "unfiltered", 0, [_traj(q, "unfiltered", 0, correct=False) for q in question_pool["train"][:2]]
    )
    st = s08_variants.run(Params(), "unfiltered", 0)
    assert (st["status"], st["correct"], st["examples"]) == ("empty", 0, 0)
    assert "no correct trajectory" in st["reason"]


def test_missing_inputs_and_untrainable_policies_fail_clearly(workdir, question_pool, capsys):
    assert _cli("backtrace", 0) == 1
    assert "factory trajectories" in capsys.readouterr().err
    write_parquet(
        [_traj(question_pool["train"][0], "backtrace", 0)],
        paths.trajectories("backtrace", 0, 0),
        "trajectory",
    )
    with pytest.raises(FactoryError, match="factory backtrace"):
        s08_variants.run(Params(), "backtrace", 0)
    _write_round("backtrace", 0, [_traj(question_pool["train"][0], "backtrace", 0, policy="scripted")])
    with pytest.raises(FactoryError, match="scripted"):
        s08_variants.run(Params(), "backtrace", 0)


def test_leakage_gate_fails_on_a_heldout_question(workdir, question_pool):
    leaked = [
        _traj(question_pool["train"][0], "backtrace", 0),
        _traj(question_pool["heldout"], "backtrace", 0),
    ]
    _write_round("backtrace", 0, leaked)
    with pytest.raises(GateFailed, match="question_split"):
        s08_variants.run(Params(), "backtrace", 0)
    assert not (paths.supervision_dir("backtrace", 0) / "train.parquet").exists()


def test_leakage_gate_fails_on_a_test_questions_text_under_a_train_id(workdir, question_pool, capsys):
    train, test = question_pool["train"][0], question_pool["test"]
    # same words as the test question, different case/punctuation/articles: the normalised texts are equal
    disguised = "  " + test["question"].upper().replace("?", " ?!") + " "
    _write_round("unfiltered", 0, [_traj(train, "unfiltered", 0, question=disguised)])
    assert _cli("unfiltered", 0) == 1
    err = capsys.readouterr().err
    assert "text_of_eval_question" in err and "question_split" not in err


def test_matching_gate_catches_a_random_control_that_drifts(workdir, question_pool, monkeypatch):
    import validators.supervision as vs
    from factory.variants.kept import Selection
    from factory.variants.registry import select_units

    def drifting(trajectory, labels_row, variant, seed):
        k = select_units(trajectory, labels_row, variant, seed)
        if variant == "random" and k.triplet_ids:  # removes one triplet too many
            return Selection(
                k.triplet_ids[1:],
                k.pair_ids,
                k.step_indices,
                k.removed_units + 1,
                k.removed_pairs,
                k.removed_triplets + 1,
            )
        return k

    _write_round("random", 0, [_traj(q, "random", 0) for q in question_pool["train"][:2]])
    monkeypatch.setattr(vs, "select_units", drifting)
    with pytest.raises(GateFailed, match="matched_controls"):
        s08_variants.run(Params(), "random", 0)


def _write_counterfactual(variant: str, round_: int, trajectories: list[dict], parametric: set[str]) -> None:
    """Closed-book counterfactual rows of the correct ``trajectories``: right for ``parametric``."""
    from factory.causal.reask import Reply, Shown
    from factory.causal.rows import Plan, trajectory_rows

    combo = ("undirected_shortest", "thought_and_answer")
    plan = Plan(variant, round_, 0, "base", *combo, ("closed_book",), (41,), 32, 1, 41)
    rows = []
    for t in trajectories:
        if t["correct"]:
            answer = t["answers"][0] if t["question_id"] in parametric else "unknown"
            reply = Reply("ok", f"Answer: {answer}", answer, None, 1, 10, 2)
            sq = [x["triplet_id"] for x in t["triplets"]][:2]
            rows += trajectory_rows(t, sq, [Shown("closed_book", None, ())], [reply], plan, "mock")
    write_parquet(rows, paths.counterfactual(variant, round_, 0), "counterfactual")


def test_exclude_parametric_drops_the_same_trajectories_from_every_variant(workdir, question_pool):
    train = question_pool["train"]
    known = {train[1]["question_id"]}
    examples = {}
    for v in ("backtrace", "random", "unfiltered"):
        trajectories = [_traj(q, v, 0) for q in train[:3]] + [_traj(train[3], v, 0, correct=False)]
        _write_round(v, 0, trajectories)
        _write_counterfactual(v, 0, trajectories[:2], known)  # train[2] was not re-asked (sample)
        assert _cli(v, 0) == 0
        kept = read_rows(paths.supervision_dir(v, 0) / "train.parquet")
        assert _cli(v, 0, "variants.exclude_parametric=true") == 0
        st = json.loads((paths.supervision_dir(v, 0) / "stats.json").read_text())
        rows = read_rows(paths.supervision_dir(v, 0) / "train.parquet")
        assert {r["question_id"] for r in kept} == {q["question_id"] for q in train[:3]}
        assert {r["question_id"] for r in rows} == {train[0]["question_id"], train[2]["question_id"]}
        assert rows == [r for r in kept if r["question_id"] not in known]
        assert (st["correct"], st["excluded"]) == (3, 1)
        assert st["parametric"] == {
            "exclude_parametric": True,
            "source": str(paths.counterfactual(v, 0, 0)),
            "excluded": 1,
            "unknown_kept": 1,
            "reasked_closed_book": 2,
        }
        examples[v] = {r["trajectory_id"].split("/", 1)[1] for r in rows}
    assert examples["backtrace"] == examples["random"] == examples["unfiltered"]
    paths.counterfactual("random", 0, 0).unlink()
    with pytest.raises(FactoryError, match="factory counterfactual --variant random --round 0"):
        s08_variants.run(Params(variants={"exclude_parametric": True}), "random", 0)
