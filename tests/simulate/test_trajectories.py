"""The trajectory simulator: gold facts, noise, exact recovery at zero noise, sensitivity, the stage."""

from __future__ import annotations

import json

import pytest

from factory.backtrace.authors_rule import authors_rule
from factory.backtrace.labels import backtrace
from factory.params.config import Params, load_params
from factory.params.label_sections import BacktraceParams
from factory.simulate.facts import gold_facts
from factory.simulate.report import aggregate, score_rows
from factory.simulate.trajectories import sample_questions, simulate, simulate_trajectory
from factory.utils import paths
from factory.utils.errors import FactoryError
from schemas import TRAJECTORY, read_rows, to_table, write_parquet


@pytest.fixture(scope="module")
def sample(ingested):
    return sample_questions(ingested.questions, 40, seed=5)


def facts_of(questions_by_id, qid):
    return [(f.subject, f.relation, f.object, f.level) for f in gold_facts(questions_by_id[qid])]


def test_gold_facts_per_dataset(questions_by_id):
    assert facts_of(questions_by_id, "2wikimultihopqa/100c512a0bde11eba7f7acde48001122") == [
        ("Charles James Mathew", "father", "Sir James Charles Mathew", 0),
        ("Sir James Charles Mathew", "place of burial", "Cork", 1),
    ]
    assert facts_of(questions_by_id, "musique/2hop__574419_270105") == [
        ("Van Hook Township", "located in the administrative territorial entity", "Mountrail County", 0),
        ("Mountrail County", "capital", "Stanley", 1),
    ]
    hotpot = facts_of(
        questions_by_id, "hotpotqa/5ae143ed55429920d5234360"
    )  # Tokarev -> Moscow State University -> 1755
    assert [(s, o, lvl) for s, _, o, lvl in hotpot] == [
        ("Sergei Aleksandrovich Tokarev", "Moscow State University", 0),
        ("Moscow State University", "1755", 1),
    ]
    # comparison: both compared entities at level 0 with a value each
    comparison = gold_facts(questions_by_id["2wikimultihopqa/f62ae4f9096911ebbdafac1f6bf848b6"])
    assert [(f.subject, f.object, f.level) for f in comparison] == [
        ("Brudebuketten", "1953", 0),
        ("Clownery", "1989", 0),
    ]


def test_records_follow_the_contract_and_are_never_trainable(sample):
    from factory.agent.policy import assert_trainable

    sims = simulate(sample[:30], [0.0, 0.5, 1.0], seed=1)
    records = [s.trajectory for s in sims]
    to_table(records, TRAJECTORY, "trajectory")
    assert {r["policy"] for r in records} == {"simulated"} and all(r["correct"] for r in records)
    assert len({r["trajectory_id"] for r in records}) == len(records)
    with pytest.raises(FactoryError, match="simulated"):
        assert_trainable(records)


def test_zero_noise_recovers_the_true_labels_exactly(sample):
    chain = [q for q in sample if q["route"] == "chain"]
    assert len(chain) >= 60 and {q["dataset"] for q in chain} == {"hotpotqa", "2wikimultihopqa", "musique"}
    for q in chain:
        sim = simulate_trajectory(q, 0.0, seed=1)
        labels = backtrace(sim.trajectory)
        truth = sim.truth
        assert not truth["unfaithful"] and truth["dropped_hops"] == 0
        assert labels["kept_triplet_ids"] == truth["true_triplet_ids"], q[
            "question_id"
        ]  # precision = recall = 1
        assert sorted(labels["kept_pair_ids"]) == truth["true_pair_ids"], q["question_id"]
        assert labels["kept_step_indices"] == truth["true_step_indices"], q["question_id"]
        assert labels["fa_ratio"] == 0.0


def test_every_noise_kind_appears_at_full_noise(sample):
    sims = simulate(sample, [1.0], seed=2)
    tags = {}
    for s in sims:
        true = set(s.truth["true_triplet_ids"])
        for t in s.trajectory["triplets"]:
            tags.setdefault(
                "true"
                if t["triplet_id"] in true
                else ("spurious" if t["relation"] == "associated with" else "distractor"),
                [],
            ).append(t)
    assert {"true", "spurious", "distractor"} <= set(tags)
    assert any(t["relation"].endswith(" of") for t in tags["true"])  # reversed relations
    assert sum(s.truth["unfaithful"] for s in sims) > len(sims) / 2
    assert sum(s.truth["dropped_hops"] for s in sims) > 0
    assert any(t["subject"].isupper() or t["subject"].islower() for t in tags["true"])  # surface variants


def test_simulation_is_deterministic_and_seeded(sample):
    q = next(q for q in sample if q["dataset"] == "musique")
    a, b = simulate_trajectory(q, 0.75, seed=3), simulate_trajectory(q, 0.75, seed=3)
    assert a.trajectory == b.trajectory and a.truth == b.truth
    others = [simulate_trajectory(q, 0.75, seed=s).trajectory["triplets"] for s in range(4, 9)]
    assert any(o != a.trajectory["triplets"] for o in others)
    padded = simulate_trajectory(q, 0.5, seed=3, total_triplets=20)
    assert len(padded.trajectory["triplets"]) == 20


def test_backtracing_gets_worse_with_noise(sample):
    sims = simulate(sample, [0.0, 0.5, 1.0], seed=1)
    res = aggregate(
        score_rows(
            sims,
            BacktraceParams(
                modes=["undirected_shortest", "directed_reach"],
                target_modes=["thought_and_answer", "gold_answer"],
            ),
        )
    )
    cell = {(r["noise"], r["mode"], r["target_mode"]): r for r in res if r["group"] == "all"}
    default = [cell[(x, "undirected_shortest", "thought_and_answer")] for x in (0.0, 0.5, 1.0)]
    assert default[0]["precision"] == default[0]["recall"] == 1.0
    assert default[0]["f1"] > default[1]["f1"] > default[2]["f1"] and default[2]["f1"] < 0.8
    assert default[2]["precision"] < 0.7
    directed = [cell[(x, "directed_reach", "thought_and_answer")] for x in (0.0, 1.0)]
    assert directed[1]["recall"] < default[2]["recall"]  # reversed relations hurt the directed mode most
    groups = {r["group"] for r in res}
    assert {
        "dataset=hotpotqa",
        "dataset=2wikimultihopqa",
        "dataset=musique",
        "route=chain",
        "route=parallel",
    } <= groups


def test_score_rows_count_true_and_false_positives(sample):
    sim = simulate_trajectory(sample[0], 1.0, seed=1)
    rows = score_rows(
        [sim], BacktraceParams(modes=["undirected_shortest"], target_modes=["thought_and_answer"])
    )
    labels = backtrace(sim.trajectory)
    truth = set(sim.truth["true_triplet_ids"])
    kept = set(labels["kept_triplet_ids"])
    assert (rows[0]["tp"], rows[0]["fp"], rows[0]["fn"]) == (
        len(kept & truth),
        len(kept - truth),
        len(truth - kept),
    )
    # the authors' rule is scored beside S_q on the same trajectory
    theirs = authors_rule(sim.trajectory)["kept_triplet_ids"]
    assert [(r["mode"], r["target_mode"]) for r in rows] == [
        ("undirected_shortest", "thought_and_answer"),
        ("authors_rule", "authors_rule"),
    ]
    assert (rows[1]["tp"], rows[1]["fp"], rows[1]["fn"]) == (
        len(theirs & truth),
        len(theirs - truth),
        len(truth - theirs),
    )


def test_simulate_stage(tmp_path, monkeypatch, ingested):
    from factory.stages import s16_simulate

    monkeypatch.chdir(tmp_path)
    params = Params(simulate={"n_questions": 4, "noise_levels": [1.0, 0.0], "seed": 3})
    with pytest.raises(FactoryError, match="factory ingest"):
        s16_simulate.run(params)
    by_dataset = {}
    for q in ingested.questions:
        by_dataset.setdefault(q["dataset"], []).append(q)
    write_parquet([q for qs in by_dataset.values() for q in qs[:15]], paths.QUESTIONS, "question")
    metrics = s16_simulate.run(params)
    assert (
        metrics["questions"] == 12 and metrics["trajectories"] == 24 and metrics["noise_levels"] == [0.0, 1.0]
    )
    trajectories = read_rows(paths.SIMULATED_DIR / "trajectories.parquet")
    assert len(trajectories) == 24 and {t["policy"] for t in trajectories} == {"simulated"}
    truth = [json.loads(line) for line in (paths.SIMULATED_DIR / "truth.jsonl").read_text().splitlines()]
    assert [t["trajectory_id"] for t in truth] == [t["trajectory_id"] for t in trajectories]
    report = (paths.REPORTS / "backtrace_sensitivity.md").read_text()
    assert "| `undirected_shortest` |" in report and "x=0" in report and "x=1" in report
    assert "vs the KnowTrace authors' rule, per dataset" in report
    assert "| dataset=musique: project S_q |" in report and "| dataset=musique: authors' rule |" in report
    assert (paths.REPORTS / "backtrace_sensitivity.png").stat().st_size > 10_000
    saved = json.loads((paths.METRICS / "simulate.json").read_text())
    zero = [
        r
        for r in saved["results"]
        if r["noise"] == 0.0 and r["group"] == "all" and r["target_mode"] == "thought_and_answer"
    ]
    assert len(zero) == 3 and all(r["f1"] == 1.0 for r in zero)
    outputs = [
        paths.SIMULATED_DIR / "trajectories.parquet",
        paths.SIMULATED_DIR / "truth.jsonl",
        paths.METRICS / "simulate.json",
        paths.REPORTS / "backtrace_sensitivity.md",
        paths.REPORTS / "backtrace_sensitivity.png",
    ]
    first = [p.read_bytes() for p in outputs]
    s16_simulate.run(params)
    assert [p.read_bytes() for p in outputs] == first  # same inputs and seed: byte-identical artifacts
    with pytest.raises(
        FactoryError, match=r"simulate\.noise_levels\.0: Input should be less than or equal to 1"
    ):
        load_params(None, ["simulate.noise_levels=[1.5]"])  # out of range: refused when params load
