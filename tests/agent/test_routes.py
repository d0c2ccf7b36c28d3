"""DTKG route classifier: parsing, sampling, metrics against the mock server, the tiny model end to end."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

import schemas
from factory.agent.routes import FEW_SHOT, parse_route, route_messages, route_metrics, sample_questions


@pytest.mark.parametrize(
    "reply, route",
    [
        ("Route: parallel (both lengths are looked up)", "parallel"),
        ("route: CHAIN", "chain"),
        ("**Route:** chain", "chain"),
        ("Route - sequential, each hop needs the last", "chain"),
        ("Route: independent", "parallel"),
        ("This is a chain question.", "chain"),
        ("I think it is parallel", "parallel"),
        ("It could be parallel or chain.", "unknown"),  # both named
        ("Route: maybe", "unknown"),
        ("", "unknown"),
        (None, "unknown"),
        ("The chains of Parallelogram", "unknown"),  # no whole word
    ],
)
def test_parse_route(reply, route):
    assert parse_route(reply) == route


def test_prompt_is_few_shot_with_own_examples(questions_by_id):
    messages = route_messages("Who is older, A or B?")
    assert messages[0]["role"] == "system" and messages[-1] == {
        "role": "user",
        "content": "Question: Who is older, A or B?",
    }
    assert len(messages) == 2 + 2 * len(FEW_SHOT)
    assert {r for _, r, _ in FEW_SHOT} == {"parallel", "chain"}
    corpus_questions = {q["question"] for q in questions_by_id.values()}
    assert not any(example in corpus_questions for example, _, _ in FEW_SHOT)
    for (example, route, _), (user, assistant) in zip(FEW_SHOT, zip(messages[1:-1:2], messages[2:-1:2])):
        assert user["content"] == f"Question: {example}" and parse_route(assistant["content"]) == route


def test_sample_is_seeded_per_dataset_and_stable(ingested):
    questions = ingested.questions
    a = sample_questions(questions, 5, seed=37)
    assert [q["question_id"] for q in a] == [
        q["question_id"] for q in sample_questions(list(reversed(questions)), 5, seed=37)
    ]
    assert {d: sum(q["dataset"] == d for q in a) for d in ("hotpotqa", "2wikimultihopqa", "musique")} == {
        "hotpotqa": 5,
        "2wikimultihopqa": 5,
        "musique": 5,
    }
    assert a != sample_questions(questions, 5, seed=38)
    # removing (or adding) records that are not chosen leaves the choice unchanged
    chosen = {q["question_id"] for q in a}
    fewer = [q for i, q in enumerate(questions) if q["question_id"] in chosen or i % 3 == 0]
    assert sample_questions(fewer, 5, seed=37) == a


def test_metrics_by_hand():
    rows = [
        {
            "question_id": "a",
            "dataset": "d1",
            "qtype": "comparison",
            "gold": "parallel",
            "predicted": "parallel",
        },
        {"question_id": "b", "dataset": "d1", "qtype": "bridge", "gold": "chain", "predicted": "parallel"},
        {"question_id": "c", "dataset": "d1", "qtype": "bridge", "gold": "chain", "predicted": "unknown"},
        {"question_id": "d", "dataset": "d2", "qtype": "2hop", "gold": "chain", "predicted": "chain"},
    ]
    m = route_metrics(rows)
    assert (
        m["overall"]["accuracy"] == 0.5
        and m["overall"]["unknown"] == 1
        and m["overall"]["accuracy_parsed"] == pytest.approx(2 / 3)
    )
    assert m["overall"]["confusion"] == {
        "chain": {"parallel": 1, "chain": 1, "unknown": 1},
        "parallel": {"parallel": 1, "chain": 0, "unknown": 0},
    }
    assert (
        m["by_dataset"]["d1"]["accuracy"] == pytest.approx(1 / 3) and m["by_dataset"]["d2"]["accuracy"] == 1.0
    )
    assert m["by_qtype"]["d1/bridge"]["correct"] == 0
    assert route_metrics([])["overall"]["accuracy"] is None


def _stage_dir(tmp_path, monkeypatch, ingested):
    from factory.utils import paths

    monkeypatch.chdir(tmp_path)
    schemas.write_parquet(ingested.questions, paths.QUESTIONS, "question")


def test_stage_against_mock_server(tmp_path, monkeypatch, ingested):
    from factory.params.config import Params
    from factory.stages import s04_classify_routes as stage
    from factory.utils import paths
    from tests.mock_openai_server import MockOpenAIServer

    gold = {q["question"]: q for q in ingested.questions}

    def script(messages, model):
        """Correct for HotpotQA; always 'parallel' (in other words) for 2Wiki; unreadable for MuSiQue."""
        q = gold[messages[-1]["content"].removeprefix("Question: ")]
        if q["dataset"] == "hotpotqa":
            return f"Route: {q['route']} (scripted)"
        if q["dataset"] == "2wikimultihopqa":
            return "The facts are independent, so: route = independent"
        return "Hmm, hard to say."

    _stage_dir(tmp_path, monkeypatch, ingested)
    n = 6
    with MockOpenAIServer(script=script) as server:
        params = Params.model_validate(
            {
                "llm": {
                    "backend": "openai",
                    "base_urls": [server.base_url],
                    "model": "mock-model",
                    "max_retries": 0,
                },
                "routes": {"n_questions": n},
            }
        )
        stage.run(params)
        assert len(server.chat_records()) == 3 * n
        first = paths.ROUTES_PREDICTED.read_bytes(), (tmp_path / "metrics/routes.json").read_text()
        stage.run(params)  # second run: every call is answered by the response cache
        assert len(server.chat_records()) == 3 * n
        assert (paths.ROUTES_PREDICTED.read_bytes(), (tmp_path / "metrics/routes.json").read_text()) == first

    rows = pq.read_table(paths.ROUTES_PREDICTED).to_pylist()
    assert pq.read_table(paths.ROUTES_PREDICTED).schema.equals(schemas.ROUTE_PREDICTIONS)
    sample = sample_questions(ingested.questions, n, 37)
    assert [r["question_id"] for r in rows] == [q["question_id"] for q in sample]
    m = json.loads((tmp_path / "metrics/routes.json").read_text())
    wiki = [q for q in sample if q["dataset"] == "2wikimultihopqa"]
    wiki_parallel = sum(q["route"] == "parallel" for q in wiki)
    assert m["by_dataset"]["hotpotqa"]["accuracy"] == 1.0
    assert m["by_dataset"]["2wikimultihopqa"]["accuracy"] == pytest.approx(wiki_parallel / n)
    assert m["by_dataset"]["musique"] == {
        **m["by_dataset"]["musique"],
        "accuracy": 0.0,
        "unknown": n,
        "accuracy_parsed": None,
    }
    assert m["overall"]["unknown"] == n and m["overall"]["questions"] == 3 * n
    assert m["overall"]["correct"] == n + wiki_parallel
    assert m["overall"]["accuracy"] == pytest.approx((n + wiki_parallel) / (3 * n))
    assert m["by_dataset"]["musique"]["confusion"]["chain"]["unknown"] == n
    assert m["by_dataset"]["2wikimultihopqa"]["confusion"]["chain"]["parallel"] == n - wiki_parallel
    assert m["model"].startswith("openai:") and m["backend"] == "openai"


def test_stage_counts_failed_calls_as_unknown(tmp_path, monkeypatch, ingested):
    from factory.params.config import Params
    from factory.stages import s04_classify_routes as stage
    from tests.mock_openai_server import FaultPlan, MockOpenAIServer

    _stage_dir(tmp_path, monkeypatch, ingested)
    with MockOpenAIServer(faults=FaultPlan(permanent_rate=1.0)) as server:
        params = Params.model_validate(
            {
                "llm": {
                    "backend": "openai",
                    "base_urls": [server.base_url],
                    "model": "mock-model",  # served: the calls themselves fail (permanent 500s)
                    "max_retries": 0,
                    "cache": False,
                },
                "routes": {"n_questions": 2},
            }
        )
        stage.run(params)
    m = json.loads((tmp_path / "metrics/routes.json").read_text())
    assert (
        m["overall"]["llm_errors"] == 6 and m["overall"]["unknown"] == 6 and m["overall"]["accuracy"] == 0.0
    )


def test_stage_with_tiny_model(tmp_path, monkeypatch, ingested, tiny_model_dir):
    from factory.params.config import Params
    from factory.stages import s04_classify_routes as stage

    _stage_dir(tmp_path, monkeypatch, ingested)
    params = Params.model_validate(
        {
            "llm": {"backend": "local", "model": str(tiny_model_dir), "device": "cpu"},
            "routes": {"n_questions": 2, "max_new_tokens": 8},
        }
    )
    stage.run(params)
    rows = pq.read_table(tmp_path / "data/interim/routes_predicted.parquet").to_pylist()
    assert len(rows) == 6 and all(r["predicted"] in ("parallel", "chain", "unknown") for r in rows)
    assert all(r["predicted"] == parse_route(r["raw"]) for r in rows if not r["error"])
    m = json.loads((tmp_path / "metrics/routes.json").read_text())
    assert m["overall"]["questions"] == 6 and m["model"].startswith("local:")
    confusion_total = sum(n for row in m["overall"]["confusion"].values() for n in row.values())
    assert confusion_total == 6
    assert m["overall"]["correct"] == sum(r["predicted"] == r["gold"] for r in rows)
