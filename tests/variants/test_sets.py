"""The three supervision variants: what each keeps, and the examples built from it.

``make_trajectory`` / ``make_labels`` build schema-exact records by hand; the stage and relevance
tests import them.
"""

from __future__ import annotations

import pytest

from factory.agent.format import parse_complete, parse_explore, render_complete, render_explore, render_final
from factory.utils.errors import FactoryError
from factory.variants.registry import select_units
from factory.variants.sets import accumulated, build_set
from schemas import SUPERVISION, TRAJECTORY, to_table, write_parquet

# iterations: list of explore steps; each a list of pairs (entity, relation, [triplets (s, r, o)], retrieved
# pids)
DEFAULT_ITERATIONS = [
    [
        (
            "Scott Derrickson",
            "nationality",
            [("Scott Derrickson", "nationality", "American"), ("Scott Derrickson", "born in", "Denver")],
            [],
        ),
        ("Ed Wood", "nationality", [("Ed Wood", "nationality", "American")], []),
    ],
    [
        (
            "Denver",
            "state",
            [("Denver", "capital of", "Colorado"), ("Denver", "nickname", "Mile High City")],
            [],
        ),
        ("Ed Wood", "films", [], []),  # the completion said None
    ],
]


def make_trajectory(
    tid: str = "base/round_1/hotpotqa/q1/k0",
    question_id: str = "hotpotqa/q1",
    *,
    question: str = "Were Scott Derrickson and Ed Wood of the same nationality?",
    iterations: list | None = None,
    answer: str = "yes",
    answers: tuple[str, ...] = ("yes",),
    correct: bool = True,
    policy: str = "base",
    dataset: str = "hotpotqa",
    qtype: str = "comparison",
    route: str = "parallel",
    sufficient_answer: bool = False,
    failed_final_explore: bool = False,
    round_: int = 1,
) -> dict:
    """A trajectory record exactly as schemas.TRAJECTORY describes it."""
    iterations = DEFAULT_ITERATIONS if iterations is None else iterations
    steps: list[dict] = []
    triplets: list[dict] = []
    n_pairs = 0

    def step(kind: str, output: str, **kw) -> dict:
        s = {
            "index": len(steps),
            "kind": kind,
            "messages": [
                {"role": "system", "content": f"You are the {kind} step."},
                {"role": "user", "content": f"Question: {question}\nStep {len(steps)}"},
            ],
            "output": output,
            "status": kw.pop("status", "ok"),
            "error": kw.pop("error", None),
            "sufficient": kw.pop("sufficient", None),
            "thought": kw.pop("thought", None),
            "answer": kw.pop("answer", None),
            "pairs": kw.pop("pairs", []),
            "pair_id": kw.pop("pair_id", None),
            "retrieved": kw.pop("retrieved", []),
            "triplet_ids": kw.pop("triplet_ids", []),
            "attempts": 1,
            "prompt_tokens": 50,
            "completion_tokens": max(1, len(output.split())),
            "latency_s": 0.01,
        }
        assert not kw
        steps.append(s)
        return s

    for it, pairs in enumerate(iterations):
        thought = f"Iteration {it}: I need more facts."
        pair_recs = []
        for entity, relation, _, _ in pairs:
            n_pairs += 1
            pair_recs.append({"pair_id": f"{tid}#p{n_pairs}", "entity": entity, "relation": relation})
        step(
            "explore",
            render_explore(thought, [(p["entity"], p["relation"]) for p in pair_recs]),
            sufficient=False,
            thought=thought,
            pairs=pair_recs,
        )
        for pair, (_, _, trips, retrieved) in zip(pair_recs, pairs):
            index = len(steps)
            ids = []
            for s_, r_, o_ in trips:
                ids.append(f"{tid}#t{len(triplets) + 1}")
                triplets.append(
                    {
                        "triplet_id": ids[-1],
                        "step_index": index,
                        "pair_id": pair["pair_id"],
                        "subject": s_,
                        "relation": r_,
                        "object": o_,
                        "source_pid": None,
                        "source_sentence": None,
                        "grounding_score": None,
                    }
                )
            step(
                "complete",
                render_complete(trips),
                pair_id=pair["pair_id"],
                retrieved=list(retrieved),
                triplet_ids=ids,
            )
    final_thought = "Both are American."
    if failed_final_explore:
        step(
            "explore",
            "I think the answer might be",
            status="parse_error",
            error="no 'entity | relation' pairs after 'Look up:'",
        )
    if sufficient_answer:
        step(
            "explore",
            f"Thought: {final_thought}\nSufficient: yes\nAnswer: {answer}",
            sufficient=True,
            thought=final_thought,
            answer=answer,
        )
    else:
        step("final", render_final(final_thought, answer) + "\n", thought=final_thought, answer=answer)
    return {
        "trajectory_id": tid,
        "question_id": question_id,
        "dataset": dataset,
        "split": "train",
        "qtype": qtype,
        "route": route,
        "policy": policy,
        "round": round_,
        "sample": 0,
        "seed": 7,
        "question": question,
        "answers": list(answers),
        "prompt_version": "knowtrace-v1",
        "model": "tiny",
        "status": "ok",
        "error": None,
        "answer": answer,
        "final_thought": final_thought,
        "em": float(correct),
        "f1": float(correct),
        "correct": correct,
        "rationalized": False,
        "steps": steps,
        "triplets": triplets,
    }


def make_labels(
    trajectory: dict,
    kept_triplet_ids: list[str],
    mode: str = "undirected_shortest",
    target_mode: str = "thought_and_answer",
    path_found: bool | None = None,
) -> dict:
    """Labels by the backtracing rule (pairs/steps derived from the kept triplets), per schemas.LABELS."""
    kt = set(kept_triplet_ids)
    steps = trajectory["steps"]
    kept_pairs = [
        p["pair_id"]
        for s in steps
        if s["kind"] == "complete" and set(s["triplet_ids"]) & kt
        for p in [{"pair_id": s["pair_id"]}]
    ]
    kept_steps = []
    for s in steps:
        if s["status"] != "ok":
            continue
        answer_step = s["kind"] == "final" or bool(s["sufficient"])
        has_pair = s["kind"] == "explore" and any(p["pair_id"] in kept_pairs for p in s["pairs"])
        has_triplet = s["kind"] == "complete" and bool(set(s["triplet_ids"]) & kt)
        if answer_step or has_pair or has_triplet:
            kept_steps.append(s["index"])
    total = sum(s["completion_tokens"] for s in steps)
    return {
        "trajectory_id": trajectory["trajectory_id"],
        "question_id": trajectory["question_id"],
        "mode": mode,
        "target_mode": target_mode,
        "correct": trajectory["correct"],
        "initial_entities": ["scott derrickson"],
        "target_entities": ["american"],
        "kept_triplet_ids": [t for t in (x["triplet_id"] for x in trajectory["triplets"]) if t in kt],
        "kept_pair_ids": kept_pairs,
        "kept_step_indices": kept_steps,
        "path_found": bool(kt) if path_found is None else path_found,
        "admin_dropped": 0,
        "filtered_tokens": total // 2,
        "total_tokens": total,
        "fa_ratio": (total // 2) / total,
        "tokenizer": "whitespace",
    }


def test_builders_follow_the_contracts():
    t = make_trajectory(failed_final_explore=True)
    to_table([t, make_trajectory("x", sufficient_answer=True)], TRAJECTORY, "trajectory")
    from schemas import LABELS

    to_table([make_labels(t, ["base/round_1/hotpotqa/q1/k0#t1"])], LABELS, "labels")


def _ids(t: dict) -> tuple[list[str], list[str]]:
    return [p["pair_id"] for s in t["steps"] for p in s["pairs"]], [x["triplet_id"] for x in t["triplets"]]


def test_unfiltered_keeps_everything_but_failed_steps():
    t = make_trajectory(failed_final_explore=True)
    k = select_units(t, None, "unfiltered", 1)
    pairs, trips = _ids(t)
    assert list(k.pair_ids) == pairs and list(k.triplet_ids) == trips and k.removed_units == 0
    failed = [s["index"] for s in t["steps"] if s["status"] != "ok"]
    assert failed and set(k.step_indices) == {s["index"] for s in t["steps"]} - set(failed)


def test_backtrace_keeps_the_labels_sets():
    t = make_trajectory()
    tid = t["trajectory_id"]
    row = make_labels(t, [f"{tid}#t1", f"{tid}#t4"])  # Derrickson nationality; Denver capital of
    k = select_units(t, row, "backtrace", 1)
    assert k.triplet_ids == (f"{tid}#t1", f"{tid}#t4")
    assert k.pair_ids == (f"{tid}#p1", f"{tid}#p3")
    # explore 0, complete 1 (p1), explore 3, complete 4 (p3), final 6; complete 2 (Ed Wood) and 5 (None)
    # dropped
    assert k.step_indices == (0, 1, 3, 4, 6)
    assert (k.removed_pairs, k.removed_triplets, k.removed_units) == (2, 3, 5)


def test_labels_must_match_the_trajectory():
    t = make_trajectory()
    with pytest.raises(FactoryError, match="needs the trajectory's backtrace labels"):
        select_units(t, None, "random", 1)
    row = make_labels(t, [])
    row["kept_triplet_ids"] = ["somewhere-else#t9"]
    with pytest.raises(FactoryError, match="kept_triplet_ids"):
        select_units(t, row, "backtrace", 1)
    with pytest.raises(FactoryError, match="belongs to trajectory"):
        select_units(make_trajectory("other"), make_labels(t, []), "backtrace", 1)
    with pytest.raises(FactoryError, match="unknown supervision variant"):
        select_units(t, row, "shuffled", 1)


def _population(n: int = 40) -> list[tuple[dict, dict]]:
    out = []
    for i in range(n):
        t = make_trajectory(f"run/q{i}/k0", f"hotpotqa/q{i}")
        trips = [x["triplet_id"] for x in t["triplets"]]
        kept = trips[i % 5 : i % 5 + 1 + i % 3]  # 1..3 triplets, varying positions
        out.append((t, make_labels(t, kept)))
    return out


def test_random_control_matches_backtrace_exactly_per_trajectory():
    for t, row in _population():
        bt = select_units(t, row, "backtrace", 17)
        rnd = select_units(t, row, "random", 17)
        assert (rnd.removed_pairs, rnd.removed_triplets) == (bt.removed_pairs, bt.removed_triplets)
        assert len(rnd.pair_ids) == len(bt.pair_ids) and len(rnd.triplet_ids) == len(bt.triplet_ids)
        # steps follow the backtracing rule
        kp, kt = set(rnd.pair_ids), set(rnd.triplet_ids)
        for s in t["steps"]:
            if s["kind"] == "final":
                expected = True
            elif s["kind"] == "explore":
                expected = any(p["pair_id"] in kp for p in s["pairs"])
            else:
                expected = bool(set(s["triplet_ids"]) & kt)
            assert (s["index"] in rnd.step_indices) == expected


def test_random_control_is_seeded_reproducible_and_differs_across_seeds():
    pop = _population()
    first = [select_units(t, r, "random", 17) for t, r in pop]
    again = [select_units(t, r, "random", 17) for t, r in pop]
    other = [select_units(t, r, "random", 18) for t, r in pop]
    assert first == again
    assert sum(a.triplet_ids != b.triplet_ids for a, b in zip(first, other)) >= 10
    # not simply the backtrace choice
    assert (
        sum(a.triplet_ids != select_units(t, r, "backtrace", 17).triplet_ids for a, (t, r) in zip(first, pop))
        >= 10
    )


def test_backtrace_examples_contain_only_kept_pairs_and_triplets():
    t = make_trajectory()
    tid = t["trajectory_id"]
    row = make_labels(t, [f"{tid}#t1", f"{tid}#t4"])
    examples = build_set([t], [row], "backtrace", 1, 17).examples
    to_table(examples, SUPERVISION, "supervision")
    assert [e["step_index"] for e in examples] == [0, 1, 3, 4, 6]
    assert [e["example_id"] for e in examples] == [f"backtrace/r1/{tid}/{i}" for i in (0, 1, 3, 4, 6)]
    by_step = {e["step_index"]: e for e in examples}
    for e in examples:
        step = t["steps"][e["step_index"]]
        assert e["messages"][:-1] == step["messages"]
        assert e["messages"][-1]["role"] == "assistant"
    assert parse_explore(by_step[0]["messages"][-1]["content"]).pairs == [("Scott Derrickson", "nationality")]
    assert parse_explore(by_step[3]["messages"][-1]["content"]).pairs == [("Denver", "state")]
    assert parse_complete(by_step[1]["messages"][-1]["content"]) == [
        ("Scott Derrickson", "nationality", "American")
    ]
    assert parse_complete(by_step[4]["messages"][-1]["content"]) == [("Denver", "capital of", "Colorado")]
    assert by_step[6]["messages"][-1]["content"] == t["steps"][6]["output"]  # final: as generated
    assert (by_step[0]["units_total"], by_step[0]["units_kept"]) == (2, 1)
    assert (by_step[1]["units_total"], by_step[1]["units_kept"]) == (2, 1)
    assert all(
        e["seed"] == 17 and e["policy"] == "base" and e["question_norm"].startswith("were scott derrickson")
        for e in examples
    )


def test_unfiltered_examples_keep_every_generation():
    t = make_trajectory(sufficient_answer=True)
    examples = build_set([t], [], "unfiltered", 2, 17).examples
    assert [e["step_index"] for e in examples] == [s["index"] for s in t["steps"]]
    triplets = [
        x
        for e in examples
        if e["step_kind"] == "complete"
        for x in parse_complete(e["messages"][-1]["content"])
    ]
    assert triplets == [(x["subject"], x["relation"], x["object"]) for x in t["triplets"]]
    assert (
        examples[-1]["messages"][-1]["content"] == t["steps"][-1]["output"]
    )  # sufficient explore: as generated
    assert all(e["units_kept"] == e["units_total"] for e in examples)


def test_only_correct_trajectories_and_counts():
    good = make_trajectory("run/a", "hotpotqa/a")
    bad = make_trajectory("run/b", "hotpotqa/b", correct=False, answer="no")
    failed = make_trajectory("run/c", "hotpotqa/c", failed_final_explore=True)
    labels = [make_labels(x, [x["triplets"][0]["triplet_id"]]) for x in (good, bad, failed)]
    built = build_set([good, bad, failed], labels, "random", 1, 5)
    assert {e["trajectory_id"] for e in built.examples} == {"run/a", "run/c"}
    st = built.stats
    assert (st["trajectories"], st["correct"], st["failed_steps_excluded"]) == (3, 2, 1)
    assert st["units"]["total"] == 2 * (4 + 5) and st["units"]["kept"] == 2 * (1 + 1)
    assert st["units"]["removed"] == st["units"]["total"] - st["units"]["kept"]
    assert sum(st["examples_by_step_kind"].values()) == st["examples"] == len(built.examples)
    assert (
        st["steps"]["kept"] + st["steps"]["dropped"]
        == st["steps"]["ok"]
        == sum(len(t["steps"]) for t in (good, failed)) - 1
    )
    assert st["incorrect"] == 1
    assert 0 < st["fa_ratio"] < 1 and st["backtrace_labels_fa_ratio"] == pytest.approx(
        labels[0]["fa_ratio"], abs=0.05
    )
    assert len({e["example_id"] for e in built.examples}) == len(built.examples)
    with pytest.raises(FactoryError, match="no backtrace labels"):
        build_set([good], [], "backtrace", 1, 5)


@pytest.mark.parametrize("policy", ["scripted", "simulated", "scripted-2wiki"])
def test_refuses_scripted_and_simulated_trajectories(policy):
    t = make_trajectory(policy=policy)
    with pytest.raises(FactoryError, match="refusing"):
        build_set([t], [make_labels(t, [])], "unfiltered", 1, 1)


def test_accumulation_reads_earlier_rounds(tmp_path):
    from factory.utils import paths

    t0, t1, t2 = (make_trajectory(f"run/r{r}/q{r}", f"hotpotqa/q{r}", round_=r) for r in range(3))
    r0, r1, r2 = (build_set([t], [], "unfiltered", r, 3).examples for r, t in enumerate((t0, t1, t2)))
    write_parquet(r0, tmp_path / paths.supervision_dir("unfiltered", 0, 0) / "train.parquet", "supervision")
    # round 1's file holds its accumulated set (rounds 0 and 1): only its own rows are taken from it
    write_parquet(
        r0 + r1, tmp_path / paths.supervision_dir("unfiltered", 1, 0) / "train.parquet", "supervision"
    )
    both, rounds = accumulated(r2, "unfiltered", 2, 0, root=tmp_path)
    assert rounds == [0, 1, 2] and [e["example_id"] for e in both] == [e["example_id"] for e in r0 + r1 + r2]
    assert accumulated(r0, "unfiltered", 0, 0, root=tmp_path) == (r0, [0])
    with pytest.raises(FactoryError, match="round 2 of unfiltered"):
        accumulated(r2, "unfiltered", 3, 0, root=tmp_path)
    with pytest.raises(FactoryError, match="already used"):
        accumulated(r1, "unfiltered", 2, 0, root=tmp_path)


def test_supervision_is_rendered_in_the_syntax_the_policy_was_prompted_in():
    from factory.agent import format_json
    from factory.backtrace.labels import step_labels

    t = {**make_trajectory(), "prompt_version": "knowtrace-json-v1"}
    tid = t["trajectory_id"]
    kept = [f"{tid}#t1", f"{tid}#t4"]
    by_step = {
        e["step_index"]: e for e in build_set([t], [make_labels(t, kept)], "backtrace", 1, 17).examples
    }
    assert format_json.parse_explore(by_step[0]["messages"][-1]["content"]).pairs == [
        ("Scott Derrickson", "nationality")
    ]
    assert format_json.parse_complete(by_step[1]["messages"][-1]["content"]) == [
        ("Scott Derrickson", "nationality", "American")
    ]
    # the backtrace stage's token accounting re-renders the kept part in the same syntax
    text = make_trajectory()
    assert step_labels(t, set(kept)).filtered_tokens != step_labels(text, set(kept)).filtered_tokens
