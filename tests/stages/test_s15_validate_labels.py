"""`factory validate-labels` on a small tmp dir built from real questions of the three corpora."""

from __future__ import annotations

import json

import pytest

from factory.cli import main
from factory.retrieval.store import PassageStore
from factory.utils import paths
from factory.utils.text import content_tokens
from schemas import write_parquet
from tests.scripted import own_passages, scripted_trajectories
from tests.variants.test_sets import make_labels, make_trajectory

DATASETS = ("hotpotqa", "2wikimultihopqa", "musique")


def _own_words(passage: dict, sent_idx: int) -> str:
    """Words only this sentence of the passage has (so the triplet grounds to exactly it)."""
    idx = max(sent_idx, 0)
    others = set(content_tokens(passage["title"]))
    for j, s in enumerate(passage["sentences"]):
        if j != idx:
            others |= set(content_tokens(s))
    words = [t for t in dict.fromkeys(content_tokens(passage["sentences"][idx])) if t not in others]
    return " ".join(words[-3:])


def _trajectory_for(q: dict, variant: str, round_: int) -> tuple[dict, list[str], list[str]] | None:
    pool = {p["pid"]: p for p in q["passages"]}
    gold, distract = [], []
    for s in q["supporting"]:
        words = _own_words(pool[s["pid"]], s["sent_idx"])
        if not words:
            return None
        gold.append((pool[s["pid"]]["title"], "says", words))
    gold_pids = {s["pid"] for s in q["supporting"]}
    for p in q["passages"]:
        if p["pid"] not in gold_pids and _own_words(p, 0):
            distract.append((p["title"], "says", _own_words(p, 0)))
        if len(distract) == 2:
            break
    tid = f"{variant}/seed_0/round_{round_}/{q['question_id']}/k0"
    pids = [p["pid"] for p in q["passages"]]
    t = make_trajectory(
        tid,
        q["question_id"],
        question=q["question"],
        iterations=[[("subject", "facts", gold + distract, pids)]],
        answer=q["answers"][0],
        answers=tuple(q["answers"]),
        dataset=q["dataset"],
        qtype=q["qtype"],
        route=q["route"],
    )
    ids = [x["triplet_id"] for x in t["triplets"]]
    return t, ids[: len(gold)], ids[len(gold) :]


@pytest.fixture(scope="module")
def corpus_sample(ingested):
    questions = []
    for d in DATASETS:
        questions += [q for q in ingested.questions if q["dataset"] == d][:12]
    pids = {p["pid"] for q in questions for p in q["passages"]}
    return questions, [p for p in ingested.passages if p["pid"] in pids]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write_inputs(questions, passages) -> dict:
    write_parquet(questions, paths.QUESTIONS, "question")
    write_parquet(passages, paths.PASSAGES, "passage")
    PassageStore.from_rows(passages).save(paths.INDEX_DIR)
    trajectories, labels = [], []
    for i, q in enumerate(questions):
        built = _trajectory_for(q, "backtrace", 1)
        if built is None:
            continue
        t, gold, distract = built
        trajectories.append(t)
        kept = gold + (distract[:1] if i % 3 == 0 else [])  # mostly right, sometimes one distractor too
        labels.append(make_labels(t, kept))
        labels.append(make_labels(t, gold[:1], "directed_reach", "answer_only"))
    write_parquet(trajectories, paths.trajectories("backtrace", 1, 0), "trajectory")
    write_parquet(labels, paths.labels("backtrace", 1, 0), "labels")
    write_parquet([], paths.trajectories("backtrace", 2, 0), "trajectory")  # a skipped round
    write_parquet(trajectories[:2], paths.trajectories("random", 1, 0), "trajectory")  # labels not built yet
    return {"trajectories": len(trajectories)}


def test_validate_labels_on_real_questions(workdir, corpus_sample):
    made = _write_inputs(*corpus_sample)
    argv = ["validate-labels", "--set", "relevance.bootstrap_samples=60", "--set", "relevance.random_seeds=2"]
    assert main(argv) == 0
    res = json.loads((paths.METRICS / "relevance.json").read_text())
    assert res["status"] == "ok" and res["sources"] == ["backtrace/seed_0/round_1"]
    assert res["counts"]["evaluated"] == made["trajectories"] >= 30
    assert {s["source"] for s in res["left_out_sources"]} == {
        "backtrace/seed_0/round_2",
        "random/seed_0/round_1",
    }
    assert set(res["verdicts"]) == set(DATASETS)
    para = res["groups"]["all"]["levels"]["paragraph"]["methods"]
    sq = para["backtrace/undirected_shortest/thought_and_answer"]["micro"]
    # gold triplets ground to gold paragraphs; only every third trajectory keeps one distractor
    assert sq["recall"]["value"] >= 0.9 and sq["precision"]["value"] >= 0.85
    assert para["unfiltered"]["micro"]["precision"]["value"] < sq["precision"]["value"]
    assert (
        "sentence" in res["groups"]["dataset=hotpotqa"]["levels"]
        and "sentence" not in res["groups"]["dataset=musique"]["levels"]
    )
    md = (paths.REPORTS / "relevance.md").read_text()
    for v in res["verdicts"].values():
        assert v["line"] in md
    png = (paths.REPORTS / "relevance.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    first = {
        p: p.read_bytes()
        for p in (
            paths.METRICS / "relevance.json",
            paths.REPORTS / "relevance.md",
            paths.REPORTS / "relevance.png",
        )
    }
    assert main(argv) == 0
    assert first == {p: p.read_bytes() for p in first}


def test_without_trajectories_the_files_say_so(workdir):
    assert main(["validate-labels"]) == 0
    res = json.loads((paths.METRICS / "relevance.json").read_text())
    assert res["status"] == "no_trajectories"
    assert "No trajectories" in (paths.REPORTS / "relevance.md").read_text()
    assert (paths.REPORTS / "relevance.png").read_bytes()[:4] == b"\x89PNG"


@pytest.fixture(scope="module")
def scripted_round(ingested):
    """Trajectories of the scripted policy (real questions, grounded in retrieved passages) and their real
    labels."""
    from factory.backtrace.labels import backtrace_modes
    from factory.params.label_sections import BacktraceParams

    questions = []
    for d in DATASETS:
        questions += [q for q in ingested.questions if q["dataset"] == d][:10]
    passages = own_passages(questions)
    trajectories = scripted_trajectories(
        questions, passages, llm_passages=ingested.passages, run_id="backtrace/seed_0/round_0"
    )
    modes = BacktraceParams(
        modes=["undirected_shortest", "directed_reach"], target_modes=["thought_and_answer", "gold_answer"]
    )
    labels = [row for t in trajectories for row in backtrace_modes(t, modes, gold_answers=t["answers"])]
    return trajectories, labels


def test_relevance_and_random_matching_on_scripted_trajectories_with_real_labels(
    ingested, questions_by_id, scripted_round
):
    from factory.backtrace.rows import labels_index
    from factory.params.agent_sections import AgentParams
    from factory.params.label_sections import RelevanceParams
    from factory.relevance.check import Source, check_relevance
    from factory.utils.selection import UNFILTERED
    from validators.supervision import matching_frame

    trajectories, labels = scripted_round
    correct = sum(t["correct"] for t in trajectories)
    assert correct >= 20
    # the random control removes exactly what real backtracing removes, per trajectory
    frame = matching_frame(
        trajectories, labels_index(labels, "undirected_shortest", "thought_and_answer"), 17
    )
    assert (
        len(frame) == correct
        and frame[["labelled", "pairs_matched", "triplets_matched", "removed_equal"]].all().all()
    )
    pids = {p["pid"]: p for p in ingested.passages}
    res = check_relevance(
        [Source("backtrace/seed_0/round_0", trajectories, labels)],
        questions_by_id,
        pids,
        RelevanceParams(bootstrap_samples=50, random_seeds=2),
        default_combo=("undirected_shortest", "thought_and_answer"),
        threshold=AgentParams().grounding_threshold,
    )
    assert res["status"] == "ok" and res["counts"]["evaluated"] == correct and len(res["combos"]) == 4
    # the scripted policy states gold facts found in its retrieved passages: they ground, mostly to gold
    # paragraphs
    assert res["counts"]["ungrounded_rate_all_triplets"] <= 0.05
    para = res["groups"]["all"]["levels"]["paragraph"]["methods"]
    assert para[UNFILTERED]["micro"]["recall"]["value"] == 1.0
    assert para["backtrace/undirected_shortest/thought_and_answer"]["micro"]["precision"]["value"] >= 0.8
    assert set(res["verdicts"]) == set(DATASETS)


def _write_counterfactual(trajectories: list[dict], labels: list[dict]) -> set[str]:
    """Counterfactual rows of a round in which S_q is load-bearing and every fourth answer is parametric."""
    from factory.causal.reask import Reply, condition_graphs
    from factory.causal.rows import Plan, trajectory_rows
    from factory.params.vocab import CONDITIONS

    sq = {r["trajectory_id"]: r["kept_triplet_ids"] for r in labels if r["mode"] == "undirected_shortest"}
    combo = ("undirected_shortest", "thought_and_answer")
    plan = Plan("backtrace", 1, 0, "base", *combo, CONDITIONS, (1, 2, 3), 32, 1, 41)
    rows, parametric = [], set()
    for i, t in enumerate(trajectories):
        shown = condition_graphs(t, sq[t["trajectory_id"]], CONDITIONS, plan.random_seeds)
        if i % 4 == 0:
            parametric.add(t["trajectory_id"])
        right = {"full": True, "without_sq": False, "only_sq": True, "without_random": True,
                 "closed_book": i % 4 == 0}  # fmt: skip
        answers = [t["answers"][0] if right[s.condition] else "unknown" for s in shown]
        replies = [Reply("ok", "", a, None, 1, 10, 2) for a in answers]
        rows += trajectory_rows(t, sq[t["trajectory_id"]], shown, replies, plan, "mock")
    write_parquet(rows, paths.counterfactual("backtrace", 1, 0), "counterfactual")
    return parametric


def test_validate_labels_states_the_causal_verdict_and_the_parametric_split(workdir, corpus_sample):
    from schemas import read_rows

    _write_inputs(*corpus_sample)
    argv = ["validate-labels", "--set", "relevance.bootstrap_samples=60", "--set", "relevance.random_seeds=2"]
    assert main(argv) == 0
    assert "No counterfactual rows were found" in (paths.REPORTS / "relevance.md").read_text()
    trajectories = read_rows(paths.trajectories("backtrace", 1, 0))
    parametric = _write_counterfactual(trajectories, read_rows(paths.labels("backtrace", 1, 0)))
    assert main(argv) == 0
    causal = json.loads((paths.METRICS / "relevance.json").read_text())["causal"]
    assert causal["status"] == "ok" and causal["counts"]["evaluated"] == len(trajectories)
    assert causal["counts"]["parametric"] == len(parametric) and causal["sources_without_rows"] == []
    assert {v["verdict"] for v in causal["verdicts"].values()} == {"load-bearing"}
    split = causal["parametric_relevance"]
    assert split["parametric"]["trajectories"] == len(parametric)
    assert split["non_parametric"]["trajectories"] == len(trajectories) - len(parametric)
    md = (paths.REPORTS / "relevance.md").read_text()
    assert "## Causal check: is S_q load-bearing?" in md
    assert "| parametric | " in md and "| non-parametric | " in md
    for v in causal["verdicts"].values():
        assert v["line"] in md and "S_q is load-bearing" in v["line"]


def test_validate_labels_with_the_entailment_judge(workdir, corpus_sample, monkeypatch):
    import re

    from schemas import read_rows
    from tests.mock_openai_server import MockOpenAIServer

    def script(messages, model):  # the mock judge: no for the distractor passages' triplets
        subject = re.search(r"Triplet: \((.*?) ;", messages[-1]["content"]).group(1)
        return "no: not stated" if subject in distractors else "yes: stated"

    _write_inputs(*corpus_sample)
    trajectories = read_rows(paths.trajectories("backtrace", 1, 0))
    gold_titles = {
        p["title"]
        for q in corpus_sample[0]
        for s in q["supporting"]
        for p in q["passages"]
        if p["pid"] == s["pid"]
    }
    distractors = {x["subject"] for t in trajectories for x in t["triplets"]} - gold_titles
    monkeypatch.setenv("FACTORY_TEST_JUDGE_KEY", "sk-test")
    with MockOpenAIServer(script=script) as server:
        argv = [
            "validate-labels",
            "--set",
            "relevance.bootstrap_samples=60",
            "--set",
            "relevance.random_seeds=2",
            "--set",
            "grounding.judge=llm",
            "--set",
            "grounding.llm.backend=openai",
            "--set",
            "grounding.llm.model=mock-model",
            "--set",
            f"grounding.llm.base_urls=[{server.base_url}]",
            "--set",
            "grounding.llm.api_key_env=FACTORY_TEST_JUDGE_KEY",
        ]
        assert main(argv) == 0
        calls = server.state.completions
        rows = read_rows(paths.ENTAILMENT)
        res = json.loads((paths.METRICS / "relevance.json").read_text())
        md = (paths.REPORTS / "relevance.md").read_text()
        first = {p: p.read_bytes() for p in (paths.ENTAILMENT, paths.METRICS / "relevance.json")}
        assert main(argv) == 0
        assert server.state.completions == calls  # the second run makes no call
        assert first == {p: p.read_bytes() for p in first}
    assert calls > 0 and len(rows) >= calls
    assert {r["entailed"] for r in rows} == {True, False}
    e = res["entailment"]
    yes = sum(r["entailed"] is True for r in rows)
    assert e["judge"] == "llm" and e["agreement_with_lexical"]["all"]["agreement"] == pytest.approx(
        yes / len(rows)
    )
    review = e["by_definition"]["all"]["paragraph_entailed"]["backtrace"]
    lexical = e["by_definition"]["all"]["paragraph"]["backtrace"]
    assert review["precision"] is not None and lexical["precision"] is not None
    assert "paragraph_entailed" in res["groups"]["all"]["levels"]
    assert "relation-blind" in md and "review: gold paragraph AND entailed" in md
    assert "## Gold relevance with entailment-checked grounding" in md


def test_lexical_judge_writes_an_empty_verdict_file(workdir):
    from schemas import read_rows

    assert main(["validate-labels"]) == 0
    assert read_rows(paths.ENTAILMENT) == []
    res = json.loads((paths.METRICS / "relevance.json").read_text())
    assert res["entailment"] == {"judge": "lexical", "prompt_version": None, "judge_model": None}
    assert "not measured" in (paths.REPORTS / "relevance.md").read_text()
