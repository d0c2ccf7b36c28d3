"""A round's supervision set as the variants stage writes it (factory/variants/round.py): the batches in
the set's order, the files they go to, the parametric trajectories left out and the set's stats."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from factory.backtrace.rows import labels_index
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.variants.round import (
    EMPTY_SET_COUNTS,
    SetFiles,
    parametric_left_out,
    set_batches,
    set_stats,
    write_empty_set,
)
from factory.variants.sets import SetBuilder
from schemas import SUPERVISION, read_rows, write_parquet
from tests.stages.test_s08_variants import _write_counterfactual
from tests.variants.test_sets import make_labels, make_trajectory

V = "backtrace"
MODE, TARGET = "undirected_shortest", "thought_and_answer"
SEED = 17  # variants.seed, protocol seed 0


def trajectory(round_: int, q: int, correct: bool = True, seed: int = 0, **kw) -> dict:
    return make_trajectory(
        f"{V}/seed_{seed}/round_{round_}/hotpotqa/q{q}/k0",
        f"hotpotqa/q{q}",
        round_=round_,
        correct=correct,
        answer="yes" if correct else "no",
        **kw,
    )


def labels_of(trajectories: list[dict]) -> list[dict]:
    """S_q: the first two triplets of each trajectory."""
    return [make_labels(t, [x["triplet_id"] for x in t["triplets"]][:2]) for t in trajectories]


def builder(round_: int, trajectories: list[dict], exclude=()) -> SetBuilder:
    return SetBuilder(
        V, round_, SEED, labels_index(labels_of(trajectories), MODE, TARGET), MODE, TARGET, exclude
    )


def write_trajectories(path: Path, trajectories: list[dict]) -> Path:
    write_parquet(trajectories, path, "trajectory")
    return path


def write_set(round_: int, trajectories: list[dict], seed: int = 0) -> list[dict]:
    """Round ``round_``'s own set of ``V`` (what the stage writes before a later round accumulates it)."""
    examples = builder(round_, trajectories).add(trajectories)
    write_parquet(examples, paths.supervision_dir(V, round_, seed) / "train.parquet", "supervision")
    return examples


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ------------------------------------------------------------------------------------ set_batches


def test_accumulated_batches_give_earlier_rounds_first_then_this_rounds_correct_trajectories(workdir):
    round0 = write_set(0, [trajectory(0, 1), trajectory(0, 2)])
    now = [trajectory(1, 3), trajectory(1, 4, correct=False), trajectory(1, 5), trajectory(1, 6)]
    src = write_trajectories(workdir / "round_1.parquet", now)
    b = builder(1, now)
    batches = list(set_batches(b, src, accumulate=True, protocol_seed=0))
    assert batches[0] == (round0, None)  # round 0's own examples, not re-derived from trajectories
    own = batches[1:]
    # then this round's, with the correct trajectories they come from (the incorrect one is not read)
    assert [t["trajectory_id"] for _, rows in own for t in rows] == [
        now[i]["trajectory_id"] for i in (0, 2, 3)
    ]
    examples = [e for batch, _ in own for e in batch]
    assert examples == builder(1, now).add([now[0], now[2], now[3]])
    assert {e["round"] for e in examples} == {1} and b.correct == 3
    assert all(t["steps"][0]["messages"] for _, rows in own for t in rows)  # whole trajectories


def test_without_accumulation_only_this_rounds_examples(workdir):
    now = [trajectory(1, 3), trajectory(1, 5)]
    src = write_trajectories(workdir / "round_1.parquet", now)
    batches = list(set_batches(builder(1, now), src, accumulate=False, protocol_seed=0))  # no round 0 set
    assert len(batches) == 1 and [t["trajectory_id"] for t in batches[0][1]] == [
        t["trajectory_id"] for t in now
    ]
    assert {e["round"] for e in batches[0][0]} == {1}


def test_an_example_id_an_earlier_round_used_is_an_error(workdir):
    now = [trajectory(1, 3)]
    src = write_trajectories(workdir / "round_1.parquet", now)
    clash = builder(1, now).add(now)[0]  # round 1's first example id, in round 0's set
    earlier = write_set(0, [trajectory(0, 1)])
    write_parquet(
        earlier + [{**earlier[0], "example_id": clash["example_id"]}],
        paths.supervision_dir(V, 0) / "train.parquet",
        "supervision",
    )
    with pytest.raises(
        FactoryError, match="round 1 of backtrace: example ids already used by an earlier round"
    ):
        list(set_batches(builder(1, now), src, accumulate=True, protocol_seed=0))


def test_accumulating_reads_the_earlier_rounds_of_the_same_protocol_seed(workdir):
    write_set(0, [trajectory(0, 1)], seed=0)
    now = [trajectory(1, 3, seed=1)]
    src = write_trajectories(workdir / "round_1.parquet", now)
    with pytest.raises(FactoryError, match=r"build round 0 of backtrace \(seed 1\) before round 1"):
        list(set_batches(builder(1, now), src, accumulate=True, protocol_seed=1))
    write_set(0, [trajectory(0, 2, seed=1)], seed=1)
    first, _ = next(set_batches(builder(1, now), src, accumulate=True, protocol_seed=1))
    assert [e["trajectory_id"] for e in first] == [f"{V}/seed_1/round_0/hotpotqa/q2/k0"] * len(first)


# ------------------------------------------------------------------------------------ SetFiles


def some_examples() -> list[dict]:
    trajectories = [trajectory(0, 1), trajectory(0, 2)]
    return builder(0, trajectories).add(trajectories)


def test_set_files_publish_parquet_and_chat_jsonl_when_the_block_ends(tmp_path):
    examples = some_examples()
    out = tmp_path / "supervision" / "round_0"
    with SetFiles(out) as files:
        files.add(examples[:3])
        files.add(examples[3:])
        assert files.rows == len(examples)
        assert not (out / "train.parquet").exists() and not (out / "train.jsonl").exists()
    assert files.rows == len(examples)
    assert pq.read_schema(out / "train.parquet").equals(SUPERVISION)
    assert read_rows(out / "train.parquet") == examples
    lines = (out / "train.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"messages": e["messages"]} for e in examples]
    assert sorted(p.name for p in out.iterdir()) == ["train.jsonl", "train.parquet"]


def test_set_files_leave_nothing_when_the_block_fails(tmp_path):
    examples = some_examples()
    fresh = tmp_path / "fresh"
    with pytest.raises(RuntimeError, match="gate failed"), SetFiles(fresh) as files:
        files.add(examples)
        raise RuntimeError("gate failed")
    assert not fresh.exists() or list(fresh.iterdir()) == []
    # a set of an earlier run stays as it was, without temporaries beside it
    old = tmp_path / "old"
    with SetFiles(old) as files:
        files.add(examples[:1])
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    with pytest.raises(RuntimeError), SetFiles(old) as files:
        files.add(examples)
        raise RuntimeError("gate failed")
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before


def test_an_empty_set_has_both_files_without_rows_and_its_stats(tmp_path):
    out = tmp_path / "supervision" / "round_3"
    stats = {"status": "skipped", "reason": "max_rounds (3) reached", **EMPTY_SET_COUNTS}
    write_empty_set(out, "backtrace", stats)
    assert pq.read_schema(out / "train.parquet").equals(SUPERVISION)
    assert read_rows(out / "kept.parquet") == []
    assert read_rows(out / "train.parquet") == [] and (out / "train.jsonl").read_text() == ""
    assert json.loads((out / "stats.json").read_text()) == stats
    with SetFiles(tmp_path / "streamed") as files:  # what SetFiles writes for a set without examples
        pass
    assert files.rows == 0
    assert (tmp_path / "streamed" / "train.parquet").read_bytes() == (out / "train.parquet").read_bytes()


# ------------------------------------------------------------------------------------ parametric


COMMAND = "factory counterfactual --variant backtrace --round 0"


def test_parametric_left_out_needs_the_counterfactual_rows(workdir):
    path = paths.counterfactual(V, 0)
    with pytest.raises(FactoryError) as err:
        parametric_left_out([trajectory(0, 1)], path, COMMAND)
    assert str(err.value) == f"{path} is missing: variants.exclude_parametric needs `{COMMAND}` first"


def test_parametric_left_out_names_the_trajectories_and_counts(workdir, caplog):
    known, other, unasked = (trajectory(0, q) for q in (1, 2, 3))
    wrong = trajectory(0, 4, correct=False)
    round_ = [known, other, unasked, wrong]
    _write_counterfactual(V, 0, [known, other], {known["question_id"]})  # `unasked` not in the sample
    caplog.set_level(logging.WARNING, logger="factory.variants.round")
    path = paths.counterfactual(V, 0)
    exclude, counts = parametric_left_out(round_, path, COMMAND)
    assert exclude == {known["trajectory_id"]}
    assert counts == {
        "exclude_parametric": True,
        "source": str(path),
        "excluded": 1,
        "unknown_kept": 1,
        "reasked_closed_book": 2,
    }
    [warning] = [r.getMessage() for r in caplog.records if r.name == "factory.variants.round"]
    assert (
        warning.startswith("variants: 1 correct trajectories were not re-asked closed-book")
        and str(path) in warning
    )
    caplog.clear()
    parametric_left_out([known, other, wrong], path, COMMAND)  # every correct one re-asked: no warning
    assert not [r for r in caplog.records if r.name == "factory.variants.round"]


# ------------------------------------------------------------------------------------ set_stats


HEAD = {"variant": V, "round": 1, "protocol_seed": 0, "seed": SEED, "mode": MODE, "target_mode": TARGET}


def outcomes_of(trajectories: list[dict]) -> list[dict]:
    return [{k: t[k] for k in ("trajectory_id", "policy", "correct")} for t in trajectories]


def test_set_stats_report_the_round_and_the_set(workdir):
    now = [trajectory(1, 3), trajectory(1, 4, correct=False), trajectory(1, 5, policy="backtrace-r0")]
    b = builder(1, now)
    examples = b.add(now)
    left_out = {"exclude_parametric": False}
    stats = set_stats(HEAD, b, outcomes_of(now), left_out, len(examples) + 7, [0, 1], 14)
    assert {k: stats[k] for k in HEAD} == HEAD
    assert (stats["status"], stats["trajectories"], stats["correct"], stats["incorrect"]) == ("ok", 3, 2, 1)
    assert (stats["examples"], stats["examples_in_set"]) == (len(examples), len(examples) + 7)
    assert stats["accumulated_rounds"] == [0, 1] and stats["expectations_passed"] == 14
    assert stats["parametric"] is left_out and stats["policies"] == {"backtrace-r0": 1, "base": 2}
    assert "reason" not in stats


def test_set_stats_of_a_round_without_a_correct_trajectory_say_so(workdir):
    now = [trajectory(1, 3, correct=False), trajectory(1, 4, correct=False)]
    b = builder(1, now)
    assert b.add(now) == []
    stats = set_stats(HEAD, b, outcomes_of(now), {"exclude_parametric": False}, 0, [1], 3)
    assert (stats["status"], stats["correct"], stats["examples"], stats["examples_in_set"]) == (
        "empty",
        0,
        0,
        0,
    )
    assert stats["reason"] == "no correct trajectory in this round"
    # accumulated: the set still holds the earlier rounds' examples, and says why this round added none
    stats = set_stats(HEAD, b, outcomes_of(now), {"exclude_parametric": False}, 5, [0, 1], 3)
    assert (stats["status"], stats["examples_in_set"]) == ("ok", 5)
    assert stats["reason"] == "no correct trajectory in this round"
