"""The response cache around a run: a reply the agent could not use is asked again by a later run (and
listed, dropped, warned about), and stages that ask the same call at once go on with one reply."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from factory.agent import prompts
from factory.agent.format import render_explore
from factory.agent.loop import Run, run_trajectories
from factory.agent.policy import Policy
from factory.cli import main
from factory.execution.summary import summarize
from factory.execution.unusable import unusable_share, unusable_warning
from factory.llm.base import ChatRequest, ChatResponse, Sampling
from factory.llm.cache import CachedLLM, cache_key
from factory.llm.responses import ResponseCache
from factory.params.config import Params
from factory.retrieval.bm25 import BM25Retriever
from tests.scripted import own_passages

GARBAGE = "<html><body>502 Bad Gateway</body></html>"  # an error page answered with status 200


class Server:
    """A simulated chat server: ``answer(kind, request) -> text``; counts the calls that reach it."""

    backend, identity = "fake", "fake:served"

    def __init__(self, answer, latency_s: float = 0.1):
        self.answer, self.calls, self.latency_s = answer, 0, latency_s

    def generate(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        self.calls += len(requests)
        return [
            ChatResponse(self.answer(prompts.step_kind(r.messages), r), 5, 3, self.latency_s)
            for r in requests
        ]

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def close(self) -> None:
        pass


def _sufficient(kind, request):
    return render_explore("I know it.", [], sufficient=True, answer="Paris")


@pytest.fixture(scope="module")
def questions(ingested) -> list[dict]:
    return ingested.questions[:4]


def _round(questions, server, db, stage="trajectories"):
    llm = CachedLLM(server, ResponseCache(db, stage=stage))
    run = Run(
        questions,
        llm,
        BM25Retriever.build(own_passages(questions)),
        Params(),
        Policy("base", None, -1),
        0,
        Sampling(),
    )
    records = run_trajectories(run, questions, 1)
    llm.close()
    return records, llm


def test_replies_a_broken_server_gave_are_asked_again_once_it_is_fixed(questions, tmp_path):
    db = tmp_path / "responses.sqlite"
    broken_for = questions[0]["question"]  # the server answers this question's calls with an error page

    def broken(kind, request):
        return (
            GARBAGE if any(broken_for in text for _, text in request.messages) else _sufficient(kind, request)
        )

    first, llm = _round(questions, Server(broken), db)
    assert [r["status"] for r in first] == ["parse_error", "ok", "ok", "ok"]
    garbage_calls = first[0]["llm_calls"]
    assert llm.unusable == garbage_calls  # every attempt of the failed calls, repairs included
    share = unusable_share(summarize(first))
    assert share["by_reason"] == {"parse_error": garbage_calls} and share["calls"] == garbage_calls + 3
    # a round whose replies were mostly unusable says so, with the likely cause
    assert unusable_warning(share).startswith(
        f"{garbage_calls / (garbage_calls + 3):.0%} of this round's replies were unusable (parse_error "
        f"{garbage_calls} of {garbage_calls + 3} calls): is llm.model the model you meant"
    )
    assert unusable_warning({**share, "share": 0.2}) is None  # a minority: the agent's own misses

    fixed = Server(_sufficient)
    second, llm = _round(questions, fixed, db)
    assert [r["status"] for r in second] == ["ok"] * 4
    assert fixed.calls == 1 and (llm.hits, llm.misses) == (3, 1)  # the good replies replayed
    assert second[1:] == first[1:]

    again = Server(_sufficient)
    third, llm = _round(questions, again, db)
    assert again.calls == 0 and third == second  # the fixed reply replaced the unusable entry


def test_an_unusable_reply_said_again_word_for_word_replays_to_the_same_bytes(questions, tmp_path):
    """A deterministic server (the local model, a greedy vLLM) asked again gives the same unusable text:
    the stored reply stays, latency included, so a re-run writes the first run's records."""
    db = tmp_path / "responses.sqlite"
    first, llm = _round(questions[:1], Server(lambda kind, r: GARBAGE, latency_s=0.1), db)
    assert first[0]["status"] == "parse_error" and llm.unusable >= 1
    same = Server(lambda kind, r: GARBAGE, latency_s=0.7)  # slower this time: the bytes would differ
    again, llm = _round(questions[:1], same, db)
    assert same.calls == llm.misses >= 1  # asked again: the server may have been fixed
    assert again == first  # it was not: the stored reply, its latency too


def test_the_local_backends_unusable_replies_are_replayed(questions, tmp_path):
    """The local model cannot be fixed under the same identity (weights, adapter, dtype): asked again, an
    unusable reply could only change with its batch-mates (bf16), so it is replayed and a re-run of a
    stage writes the same bytes."""

    class LocalServer(Server):
        backend, identity = "local", "local:base@0:bfloat16"

    db = tmp_path / "responses.sqlite"
    first, llm = _round(questions[:1], LocalServer(lambda kind, r: GARBAGE), db)
    assert first[0]["status"] == "parse_error" and llm.unusable >= 1
    other = LocalServer(lambda kind, r: "another reply")
    again, llm = _round(questions[:1], other, db)
    assert other.calls == 0 and llm.misses == 0 and again == first


def test_an_empty_reply_is_unusable_too(questions, tmp_path):
    db = tmp_path / "responses.sqlite"
    _, llm = _round(questions[:1], Server(lambda kind, r: ""), db)
    assert llm.unusable >= 1
    fixed = Server(_sufficient)
    records, _ = _round(questions[:1], fixed, db)
    assert fixed.calls == 1 and records[0]["status"] == "ok"


def _fill(db) -> list[str]:
    """Two stages' entries, one of them marked unusable."""
    request = [ChatRequest.of([{"role": "user", "content": f"q{i}"}], Sampling()) for i in range(3)]
    keys = [cache_key("fake", "fake:a", r) for r in request]
    for stage, batch in (("trajectories", keys[:2]), ("evaluate", keys[2:])):
        cache = ResponseCache(db, stage=stage)
        cache.store([(k, "fake", "fake:a", ChatResponse("reply")) for k in batch])
        if stage == "trajectories":
            cache.mark_unusable(keys[:1], "parse_error")
        cache.close()
    return keys


def test_cache_list_and_drop_by_model_stage_outcome_and_date(tmp_path, capsys):
    db = tmp_path / "responses.sqlite"
    keys = _fill(db)
    assert main(["cache", "list", "--cache", str(db)]) == 0
    listed = capsys.readouterr().out
    assert "| 1 | ok | evaluate |" in listed and "| 1 | unusable:parse_error | trajectories |" in listed
    assert "| 1 | ok | trajectories |" in listed and "| fake | fake:a |" in listed
    assert main(["cache", "list", "--cache", str(db), "--outcome", "unusable", "--model", "fake:a"]) == 0
    assert capsys.readouterr().out.count("\n") == 3  # the header, its rule, one row
    assert main(["cache", "list", "--cache", str(db), "--model", "other"]) == 0
    assert "no entry" in capsys.readouterr().out

    assert main(["cache", "drop", "--cache", str(db)]) == 1  # no filter: refused
    assert "name at least one of" in capsys.readouterr().err
    assert main(["cache", "drop", "--cache", str(db), "--before", "2000-01-01"]) == 0
    assert "dropped 0 entries" in capsys.readouterr().err
    assert main(["cache", "drop", "--cache", str(db), "--stage", "trajectories", "--outcome", "ok"]) == 0
    assert "dropped 1 entries" in capsys.readouterr().err
    cache = ResponseCache(db)
    assert set(cache.get_many(keys)) == {keys[2]} and len(cache) == 2  # the unusable one stays listed
    cache.close()
    assert main(["cache", "list", "--cache", str(db), "--outcome", "bad"]) == 1
    assert "expected ok, unusable or unusable:<reason>" in capsys.readouterr().err
    assert main(["cache", "list", "--cache", str(db), "--before", "yesterday"]) == 1
    assert "expected an ISO date" in capsys.readouterr().err


def test_a_cache_file_of_the_earlier_layout_gains_the_columns(tmp_path):
    db = tmp_path / "responses.sqlite"
    key = cache_key("fake", "fake:a", ChatRequest.of([{"role": "user", "content": "q"}], Sampling()))
    raw = sqlite3.connect(db)
    raw.execute(
        "CREATE TABLE identities (id INTEGER PRIMARY KEY, backend TEXT NOT NULL, identity TEXT NOT NULL, "
        "UNIQUE (backend, identity))"
    )
    raw.execute(
        "CREATE TABLE entries (key BLOB NOT NULL UNIQUE, identity INTEGER NOT NULL, response TEXT NOT NULL, "
        "created REAL NOT NULL)"
    )
    raw.execute("INSERT INTO identities VALUES (1, 'fake', 'fake:a')")
    raw.execute("INSERT INTO entries VALUES (?, 1, ?, 0)", (bytes.fromhex(key), '{"text": "old"}'))
    raw.commit()
    raw.close()
    cache = ResponseCache(db, stage="trajectories")
    assert cache.get(key).text == "old"  # an entry of before outcomes is ok
    cache.mark_unusable([key], "parse_error")
    cache.flush()
    assert cache.get(key) is None
    cache.close()
    assert main(["cache", "list", "--cache", str(db)]) == 0


def test_two_processes_asking_the_same_calls_at_once_go_on_with_one_reply(tmp_path):
    """Two caches on one file (as two stages' processes), both missing the same calls, both asking a
    server that answers each differently: both go on with the reply stored first, the one a replay gives."""
    db = tmp_path / "responses.sqlite"
    requests = [ChatRequest.of([{"role": "user", "content": f"q{i}"}], Sampling()) for i in range(20)]
    both_asked = threading.Barrier(2)

    class Racing(Server):
        def generate(self, batch):
            both_asked.wait(timeout=10)  # each looked the calls up and missed before either stores
            return [ChatResponse(f"{self.name}:{r.messages[0][1]}", latency_s=len(self.name)) for r in batch]

    outputs = {}

    def stage(name):
        server = Racing(None)
        server.name = name
        llm = CachedLLM(server, ResponseCache(db, stage=name, commit_window_s=0.001 * len(name)))
        outputs[name] = [(r.text, r.latency_s) for r in llm.generate(requests)]
        llm.close()

    threads = [threading.Thread(target=stage, args=(name,)) for name in ("random", "unfiltered")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outputs["random"] == outputs["unfiltered"]
    replay = CachedLLM(Server(None), ResponseCache(db))
    assert [(r.text, r.latency_s) for r in replay.generate(requests)] == outputs["random"]
    replay.close()


def test_streaming_stages_asking_the_same_call_at_once_go_on_with_one_reply(tmp_path):
    db = tmp_path / "responses.sqlite"
    request = ChatRequest.of([{"role": "user", "content": "q"}], Sampling())
    both_asked = threading.Barrier(2)
    outputs = {}

    class Streaming(Server):
        def __init__(self, name):
            super().__init__(None)
            self.name, self.loop = name, asyncio.new_event_loop()

        async def acomplete(self, r):
            await asyncio.to_thread(both_asked.wait, 10)
            return ChatResponse(f"{self.name} says hi", latency_s=0.5)

        def run(self, coroutine):
            return self.loop.run_until_complete(coroutine)

    def stage(name):
        inner = Streaming(name)
        llm = CachedLLM(inner, ResponseCache(db, stage=name))
        outputs[name] = llm.run(llm.acomplete(request)).text
        llm.close()
        inner.loop.close()

    threads = [threading.Thread(target=stage, args=(name,)) for name in ("random", "unfiltered")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outputs["random"] == outputs["unfiltered"]
    cache = ResponseCache(db)
    assert cache.get(cache_key("fake", "fake:served", request)).text == outputs["random"]
    cache.close()


def test_a_reasked_reply_that_does_not_parse_is_asked_again_by_a_later_run(tmp_path):
    from factory.agent.format import render_final
    from factory.causal.reask import reask

    version = Params().agent.prompt_version
    asked = [(version, [{"role": "system", "content": "answer"}, {"role": "user", "content": "Who?"}])]
    db = tmp_path / "responses.sqlite"
    for answer, calls, status in ((GARBAGE, 2, "parse_error"), (render_final("so", "Paris"), 1, "ok")):
        server = Server(lambda kind, r, answer=answer: answer)
        llm = CachedLLM(server, ResponseCache(db))
        (reply,), _ = reask(llm, asked, max_new_tokens=32, seed=0, repair_attempts=1)
        llm.close()
        assert (reply.status, server.calls) == (status, calls)
