"""TRACE export on real trajectories of the scripted policy over the shared corpora, and the stage."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest

import schemas
from factory.params.config import Params
from factory.params.round_sections import TraceParams
from factory.retrieval.store import PassageStore
from factory.trace.export import EXPORTED, INCORRECT, NOT_IN_SET, export_stats, export_trace
from factory.trace.protocol import SYSTEM_PROMPT
from factory.trace.rewards import parse_trace, score_completion
from factory.utils.errors import FactoryError
from factory.variants import registry
from factory.variants.registry import select_units
from factory.variants.round import selection_rows
from tests.scripted import scripted_trajectories

PER_DATASET = 4


@pytest.fixture(scope="module")
def scripted(ingested):
    """Scripted-policy trajectories (gold facts, real retrieval and grounding) on a few questions per
    dataset (of any split: 2WikiMultihopQA's shared sample is its dev file alone)."""
    by_dataset: dict[str, list[dict]] = {}
    for q in ingested.questions:
        by_dataset.setdefault(q["dataset"], []).append(q)
    questions = [
        q
        for d in sorted(by_dataset)
        for q in sorted(by_dataset[d], key=lambda q: q["question_id"])[:PER_DATASET]
    ]
    pids = {p["pid"] for q in questions for p in q["passages"]}
    passages = [p for p in ingested.passages if p["pid"] in pids]
    trajectories = scripted_trajectories(questions, passages)
    return {
        "trajectories": trajectories,
        "questions": {q["question_id"]: q for q in questions},
        "passages": {p["pid"]: p for p in passages},
    }


def gold_labels(trajectories, questions) -> list[dict]:
    """Labels rows (schemas.LABELS) that keep exactly the triplets grounded in a gold paragraph: an
    oracle backtrace, so the backtrace variant's relevance is the gold paragraphs."""
    rows = []
    for t in trajectories:
        gold = {s["pid"] for s in questions[t["question_id"]]["supporting"]}
        kept = [x for x in t["triplets"] if x["source_pid"] in gold]
        kept_pairs = sorted({x["pair_id"] for x in kept if x["pair_id"]})
        kept_ids = {x["triplet_id"] for x in kept}
        steps = [
            s["index"]
            for s in t["steps"]
            if s["kind"] == "final"
            or s.get("sufficient")
            or (s["kind"] == "explore" and any(p["pair_id"] in kept_pairs for p in s["pairs"]))
            or (s["kind"] == "complete" and kept_ids & set(s["triplet_ids"]))
        ]
        rows.append(
            {
                "trajectory_id": t["trajectory_id"],
                "question_id": t["question_id"],
                "mode": "undirected_shortest",
                "target_mode": "thought_and_answer",
                "correct": t["correct"],
                "initial_entities": [],
                "target_entities": [],
                "kept_triplet_ids": [x["triplet_id"] for x in kept],
                "kept_pair_ids": kept_pairs,
                "kept_step_indices": steps,
                "path_found": bool(kept),
                "admin_dropped": 0,
                "filtered_tokens": 0,
                "total_tokens": 0,
                "fa_ratio": 0.0,
                "tokenizer": "whitespace",
            }
        )
    schemas.to_table(rows, schemas.LABELS, "labels")
    return rows


def kept_by(trajectories, labels, variant, seed=17):
    """What the variants stage keeps of the correct trajectories (its kept.parquet rows)."""
    by_tid = {row["trajectory_id"]: row for row in labels}
    kept = {
        t["trajectory_id"]: select_units(t, by_tid.get(t["trajectory_id"]), variant, seed)
        for t in trajectories
        if t["correct"] and (t["trajectory_id"] in by_tid or not registry.variant(variant).needs_labels)
    }
    return selection_rows(variant, kept)


def export(scripted, variant, labels=(), max_passages=None, kept=None, **kw):
    trace = TraceParams() if max_passages is None else TraceParams(max_passages=max_passages)
    if kept is None:
        kept = kept_by(scripted["trajectories"], list(labels), variant)
    return export_trace(
        scripted["trajectories"],
        list(labels),
        kept,
        scripted["questions"],
        scripted["passages"],
        trace,
        variant=variant,
        round_=0,
        seed=0,
        mode="undirected_shortest",
        target_mode="thought_and_answer",
        allow_synthetic=True,
        **kw,
    )


def test_scripted_trajectories_are_usable(scripted):
    trajectories = scripted["trajectories"]
    assert len(trajectories) == 3 * PER_DATASET
    assert sum(t["correct"] for t in trajectories) >= 3 * PER_DATASET - 2


def test_unfiltered_export_records(scripted):
    result = export(scripted, "unfiltered", max_passages=8)
    trajectories = scripted["trajectories"]
    assert set(result.statuses) == {t["trajectory_id"] for t in trajectories}  # every trajectory has a status
    assert sum(s == INCORRECT for s in result.statuses.values()) == sum(
        not t["correct"] for t in trajectories
    )
    assert len(result.sft) == sum(s == EXPORTED for s in result.statuses.values()) >= len(trajectories) - 3
    schemas.to_table(result.sft, schemas.TRACE_SFT, "trace_sft")
    schemas.to_table(result.rl, schemas.TRACE_RL, "trace_rl")
    by_tid = {t["trajectory_id"]: t for t in trajectories}
    for rec in result.sft:
        t = by_tid[rec["trajectory_id"]]
        question = scripted["questions"][t["question_id"]]
        system, user, assistant = rec["messages"]
        assert (system["role"], user["role"], assistant["role"]) == ("system", "user", "assistant")
        assert system["content"] == SYSTEM_PROMPT
        # passages: first-retrieval order, de-duplicated, numbered [1]..[n] in the user turn
        order = list(
            dict.fromkeys(pid for s in sorted(t["steps"], key=lambda s: s["index"]) for pid in s["retrieved"])
        )
        assert rec["passage_ids"] == order[:8]
        for i, pid in enumerate(rec["passage_ids"], start=1):
            assert f"[{i}] {scripted['passages'][pid]['title']}: " in user["content"]
        assert f"[{len(rec['passage_ids']) + 1}]" not in user["content"]
        assert user["content"].startswith(f"Question: {t['question']}")
        # target: the protocol, relevance = passages grounding the stated triplets, answer = the trajectory's
        parsed = parse_trace(assistant["content"])
        assert parsed is not None and parsed.answer == t["answer"]
        stated = {x["triplet_id"]: x for x in t["triplets"] if x["triplet_id"] in rec["triplet_ids"]}
        assert (
            sorted(parsed.relevance)
            == rec["relevance"]
            == sorted({rec["passage_ids"].index(x["source_pid"]) + 1 for x in stated.values()})
        )
        cited = [int(c) for c in re.findall(r"\[(\d+)\]", parsed.analysis)]
        assert set(cited) == set(rec["relevance"])
        for x in stated.values():
            assert (
                f"{x['subject']} ({x['relation']}): {x['object']} "
                f"[{rec['passage_ids'].index(x['source_pid']) + 1}]." in parsed.analysis
            )
        # reference columns
        gold = {s["pid"] for s in question["supporting"]}
        assert rec["gold_relevant_indices"] == [
            i for i, pid in enumerate(rec["passage_ids"], 1) if pid in gold
        ]
        assert rec["gold_answers"] == question["answers"]
        # rewards the target earns, recomputed
        expected = score_completion(assistant["content"], question["answers"], rec["gold_relevant_indices"])
        assert {k: rec[f"reward_{k}"] for k in expected} == expected
        assert rec["reward_format"] == 1.0 and rec["reward_accuracy"] == 1.0
    rl_by_tid = {r["trajectory_id"]: r for r in result.rl}
    for rec in result.sft:  # the RL prompt is the SFT prompt without the assistant turn
        assert rl_by_tid[rec["trajectory_id"]]["prompt"] == rec["messages"][:2]


def test_backtrace_relevance_equal_to_gold_earns_one(scripted):
    labels = gold_labels(scripted["trajectories"], scripted["questions"])
    result = export(scripted, "backtrace", labels)
    full = [
        r
        for r in result.sft
        if r["gold_coverage"] == "full" and set(r["relevance"]) == set(r["gold_relevant_indices"])
    ]
    assert len(full) >= len(scripted["trajectories"]) // 2
    for rec in full:
        assert rec["reward_relevance"] == 1.0
        assert rec["reward_bonus"] == 10.0
    for rec in result.sft:  # only gold-grounded triplets are stated: relevance never names a non-gold passage
        assert set(rec["relevance"]) <= set(rec["gold_relevant_indices"])
        assert rec["reward_relevance"] in (0.5, 1.0)
    stats = export_stats(result, len(scripted["trajectories"]))
    assert stats["sft_rewards"]["overall"]["relevance"] > 0.8
    assert sum(stats["by_status"].values()) == stats["trajectories"]
    assert set(stats["sft_rewards"]["by_dataset"]) == {"2wikimultihopqa", "hotpotqa", "musique"}


def test_random_variant_states_the_sets_draw(scripted):
    labels = gold_labels(scripted["trajectories"], scripted["questions"])
    by_tid = {r["trajectory_id"]: r for r in labels}
    bt = {r["trajectory_id"]: r for r in export(scripted, "backtrace", labels).sft}
    drawn = kept_by(scripted["trajectories"], labels, "random")
    rnd = export(scripted, "random", labels, kept=drawn)
    assert rnd.sft, "the random control exported nothing"
    kept = {row["trajectory_id"]: row for row in drawn}
    for rec in rnd.sft:
        tid = rec["trajectory_id"]
        assert set(rec["triplet_ids"]) <= set(kept[tid]["kept_triplet_ids"])  # only what the set kept
        if tid in bt:  # matched in size (before dropping uncitable triplets)
            assert len(kept[tid]["kept_triplet_ids"]) == len(by_tid[tid]["kept_triplet_ids"])
    # the export reads the draw, never draws again: another draw in kept.parquet is what it states
    other = kept_by(scripted["trajectories"], labels, "random", seed=99)
    moved = export(scripted, "random", labels, kept=other)
    other_kept = {row["trajectory_id"]: set(row["kept_triplet_ids"]) for row in other}
    assert all(set(r["triplet_ids"]) <= other_kept[r["trajectory_id"]] for r in moved.sft)
    assert moved.sft != rnd.sft


def test_trajectories_the_set_does_not_hold_and_the_passage_cap(scripted):
    result = export(scripted, "backtrace", [])  # no labels: the set holds nothing of any trajectory
    assert set(result.statuses.values()) <= {NOT_IN_SET, INCORRECT} and not result.sft and not result.rl
    capped = export(scripted, "unfiltered", max_passages=1)
    assert all(len(r["passage_ids"]) == 1 for r in capped.rl)
    assert all(r["relevance"] == [1] for r in capped.sft)
    stats = export_stats(capped, len(scripted["trajectories"]))
    assert stats["passages"]["cut_by_cap"] > 0 and stats["triplets"]["triplets_beyond_cap"] > 0
    assert stats["by_status"]["no_cited_triplet"] == stats["rl_records"] - stats["sft_records"]


def test_synthetic_policies_refused_without_flag(scripted):
    with pytest.raises(FactoryError, match="scripted"):
        export_trace(
            scripted["trajectories"],
            [],
            kept_by(scripted["trajectories"], [], "unfiltered"),
            scripted["questions"],
            scripted["passages"],
            variant="unfiltered",
            round_=0,
            mode="undirected_shortest",
            target_mode="thought_and_answer",
        )


# ---------------------------------------------------------------- the stage


def _stage_inputs(tmp_path, scripted, ingested, trajectories, labels):
    from factory.utils import paths

    qids = {t["question_id"] for t in trajectories} or set(scripted["questions"])
    questions = [q for q in ingested.questions if q["question_id"] in qids]
    schemas.write_parquet(questions, tmp_path / paths.QUESTIONS, "question")
    schemas.write_parquet(list(scripted["passages"].values()), tmp_path / paths.PASSAGES, "passage")
    PassageStore.from_rows(scripted["passages"].values()).save(tmp_path / paths.INDEX_DIR)
    schemas.write_parquet(trajectories, tmp_path / paths.trajectories("backtrace", 0, 0), "trajectory")
    schemas.write_parquet(labels, tmp_path / paths.labels("backtrace", 0, 0), "labels")
    kept_rows_ = kept_by(trajectories, labels, "backtrace")
    schemas.write_parquet(
        kept_rows_, tmp_path / paths.supervision_dir("backtrace", 0, 0) / paths.KEPT, "kept"
    )


def test_stage_writes_parquet_jsonl_stats_deterministically(tmp_path, monkeypatch, scripted, ingested):
    from factory.stages import s09_export_trace as stage
    from factory.utils import paths

    # The stage refuses scripted trajectories (checked below); to exercise its files, these real
    # scripted trajectories are relabelled as a model policy.
    trajectories = [{**t, "policy": "base"} for t in scripted["trajectories"]]
    labels = gold_labels(trajectories, scripted["questions"])
    monkeypatch.chdir(tmp_path)
    _stage_inputs(tmp_path, scripted, ingested, trajectories, labels)
    stage.run(Params(), variant="backtrace", round_=0, seed=0)
    out = paths.trace_dir("backtrace", 0, 0)
    files = {
        name: (out / name).read_bytes()
        for name in ("sft.parquet", "sft.jsonl", "rl.parquet", "rl.jsonl", "stats.json")
    }
    stats = json.loads(files["stats.json"])
    assert stats["status"] == "ok" and stats["trajectories"] == len(trajectories)
    assert sum(stats["by_status"].values()) == len(trajectories)
    assert pq.read_table(out / "sft.parquet").schema.equals(schemas.TRACE_SFT)
    assert (
        pq.read_table(out / "rl.parquet").num_rows
        == stats["rl_records"]
        == len(files["rl.jsonl"].splitlines())
    )
    sft_lines = [json.loads(line) for line in files["sft.jsonl"].splitlines()]
    assert len(sft_lines) == stats["sft_records"] > 0 and set(sft_lines[0]) == {"messages"}
    rl_line = json.loads(files["rl.jsonl"].splitlines()[0])
    assert {
        "prompt",
        "gold_answers",
        "gold_relevant_indices",
        "gold_coverage",
        "dataset",
        "qtype",
        "route",
    } <= set(rl_line)
    assert json.loads(paths.stage_metrics("trace", "backtrace", 0, 0).read_text()) == stats
    assert stats["sft_rewards"]["overall"]["format"] == 1.0
    stage.run(Params(), variant="backtrace", round_=0, seed=0)  # same inputs -> same bytes
    assert {name: (out / name).read_bytes() for name in files} == files

    schemas.write_parquet(scripted["trajectories"], paths.trajectories("backtrace", 0, 0), "trajectory")
    with pytest.raises(FactoryError, match="synthetic"):
        stage.run(Params(), variant="backtrace", round_=0, seed=0)


def test_stage_empty_round_writes_empty_files(tmp_path, monkeypatch, scripted, ingested):
    from factory.stages import s09_export_trace as stage
    from factory.utils import paths

    monkeypatch.chdir(tmp_path)
    _stage_inputs(tmp_path, scripted, ingested, [], [])
    stage.run(Params(), variant="backtrace", round_=0, seed=0)
    out = paths.trace_dir("backtrace", 0, 0)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["status"] == "empty" and stats["sft_records"] == 0 and stats["rl_records"] == 0
    assert pq.read_table(out / "rl.parquet").num_rows == 0 and (out / "sft.jsonl").read_text() == ""
    # a round after a stop decision records why it was skipped
    paths.decision("backtrace", 0, 0).parent.mkdir(parents=True, exist_ok=True)
    paths.decision("backtrace", 0, 0).write_text(
        json.dumps({"stop": True, "reason": "max_rounds (1) reached"})
    )
    schemas.write_parquet([], paths.trajectories("backtrace", 1, 0), "trajectory")
    stage.run(Params(), variant="backtrace", round_=1, seed=0)
    stats = json.loads((paths.trace_dir("backtrace", 1, 0) / "stats.json").read_text())
    assert stats["status"] == "skipped" and stats["reason"] == "max_rounds (1) reached"
    with pytest.raises(FactoryError, match="missing"):
        stage.run(Params(), variant="backtrace", round_=2, seed=0)


def test_backtrace_variant_with_real_labels(scripted):
    from factory.backtrace.labels import backtrace
    from factory.utils.text import normalize_answer

    trajectories = scripted["trajectories"]
    labels = [backtrace(t) for t in trajectories]
    by_tid = {r["trajectory_id"]: r for r in labels}
    result = export(scripted, "backtrace", labels)
    assert sum(1 for _ in result.statuses) == len(trajectories)
    assert result.sft, "no trajectory kept a cited triplet"
    for rec in result.sft:
        row = by_tid[rec["trajectory_id"]]
        assert set(rec["triplet_ids"]) <= set(row["kept_triplet_ids"])  # only S_q is stated
        initial = [normalize_answer(e) for e in row["initial_entities"]]
        triplets = {
            t["triplet_id"]: t
            for t in next(t for t in trajectories if t["trajectory_id"] == rec["trajectory_id"])["triplets"]
        }
        subjects = [normalize_answer(triplets[i]["subject"]) for i in rec["triplet_ids"]]

        def starts(name, initial=initial):
            return any(name == e or f" {e} " in f" {name} " or f" {name} " in f" {e} " for e in initial)

        if any(starts(s) for s in subjects):  # the chain starts at an initial entity
            assert starts(subjects[0])
    for tid, status in result.statuses.items():  # a trajectory whose S_q is empty gets an RL record only
        if not by_tid[tid]["kept_triplet_ids"] and status != INCORRECT:
            assert status == "no_cited_triplet"
