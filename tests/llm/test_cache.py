"""The SQLite response cache: re-runs make no calls, adapters never share entries, failures are not kept."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from factory.llm.base import ChatRequest, ChatResponse, Sampling
from factory.llm.cache import CachedLLM, cache_key
from factory.llm.responses import ResponseCache
from tests.mock_openai_server import FaultPlan, MockOpenAIServer, openai_llm

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _requests(n: int, sampling: Sampling | None = None) -> list[ChatRequest]:
    sampling = sampling or Sampling(max_new_tokens=16)
    return [ChatRequest.of([{"role": "user", "content": f"q{i}"}], sampling) for i in range(n)]


def _adapter(path, value: float):
    import numpy as np
    from safetensors.numpy import save_file

    path.mkdir(parents=True)
    save_file({"w": np.full((2,), value, dtype=np.float32)}, str(path / "adapter_model.safetensors"))
    return path


class Counting:
    """A fake backend that counts what reaches it (for tests of the wrapper alone)."""

    backend, identity = "fake", "fake:1"

    def __init__(self):
        self.batches: list[list[ChatRequest]] = []

    def generate(self, requests):
        self.batches.append(list(requests))
        return [
            ChatResponse(
                text=f"{r.messages[-1][1]}#{r.sample}",
                prompt_tokens=3,
                completion_tokens=2,
                latency_s=0.25,
                finish_reason="stop",
                error="boom" if "fail" in r.messages[-1][1] else None,
            )
            for r in requests
        ]

    def count_tokens(self, text):
        return len(text.split())

    def close(self):
        pass


def test_rerun_makes_zero_calls_and_adapter_change_misses(tmp_path):
    db = tmp_path / "cache" / "responses.sqlite"
    requests = _requests(20)
    with MockOpenAIServer(latency_s=0.01) as server:
        first = CachedLLM(openai_llm([server.base_url], tmp_path), ResponseCache(db))
        out1 = first.generate(requests)
        first.close()
        assert (first.hits, first.misses, server.state.completions) == (0, 20, 20)

        # A second run (new process in real life: new backend, new cache handle on the same file).
        second = CachedLLM(openai_llm([server.base_url], tmp_path), ResponseCache(db))
        out2 = second.generate(requests)
        assert server.state.completions == 20 and (second.hits, second.misses) == (20, 0)
        assert [r.text for r in out2] == [r.text for r in out1] and all(r.cached for r in out2)
        assert [(r.latency_s, r.prompt_tokens, r.completion_tokens) for r in out2] == [
            (r.latency_s, r.prompt_tokens, r.completion_tokens) for r in out1
        ]

        second.load_adapter("bt-r1", _adapter(tmp_path / "a1", 1.0))
        out3 = second.generate(requests)
        assert server.state.completions == 40 and second.misses == 20 and not any(r.cached for r in out3)
        assert all(r.text.startswith("echo[bt-r1]") for r in out3)

        # A different adapter never hits another adapter's entries; its own entries do hit.
        third = CachedLLM(openai_llm([server.base_url], tmp_path), ResponseCache(db))
        third.load_adapter("bt-r2", _adapter(tmp_path / "a2", 2.0))
        third.generate(requests)
        assert server.state.completions == 60 and third.hits == 0
        third.inner.use_model("bt-r1", second.inner.adapter_digest)
        assert [r.text for r in third.generate(requests)] == [r.text for r in out3] and third.hits == 20
        assert server.state.completions == 60
        second.close()
        third.close()


def test_key_covers_sampling_and_sample_index():
    base = ChatRequest.of([{"role": "user", "content": "q"}], Sampling())
    variants = [
        ChatRequest(base.messages, Sampling(temperature=0.7)),
        ChatRequest(base.messages, Sampling(top_p=0.9)),
        ChatRequest(base.messages, Sampling(max_new_tokens=7)),
        ChatRequest(base.messages, Sampling(seed=1)),
        ChatRequest(base.messages, Sampling(stop=("\n",))),
        ChatRequest(base.messages, Sampling(), sample=1),
        ChatRequest((("system", "q"),), Sampling()),
    ]
    keys = {cache_key("local", "m@1", r) for r in [base, *variants]}
    keys |= {cache_key("openai", "m@1", base), cache_key("local", "m@2", base)}
    assert len(keys) == len(variants) + 3
    assert cache_key("local", "m@1", base) == cache_key(
        "local", "m@1", ChatRequest.of([{"role": "user", "content": "q"}], Sampling())
    )


def test_failures_not_stored_and_duplicates_sent_once(tmp_path):
    inner = Counting()
    llm = CachedLLM(inner, ResponseCache(tmp_path / "c.sqlite"))
    requests = [
        *_requests(3),
        ChatRequest.of([{"role": "user", "content": "fail"}], Sampling()),
        _requests(1)[0],
    ]
    out = llm.generate(requests)
    assert [len(b) for b in inner.batches] == [4]  # the duplicate of q0 went out once
    assert out[0].text == out[4].text == "q0#0" and out[3].error == "boom"
    again = llm.generate(requests)
    assert [len(b) for b in inner.batches] == [4, 1] and inner.batches[1][0].messages[-1][1] == "fail"
    assert [r.cached for r in again] == [True, True, True, False, True]
    assert len(llm.cache) == 3


def test_concurrent_processes_share_the_file(tmp_path):
    db = tmp_path / "shared.sqlite"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from factory.llm.base import ChatRequest, ChatResponse, Sampling
        from factory.llm.cache import cache_key
        from factory.llm.responses import ResponseCache
        cache = ResponseCache({str(db)!r})
        tag = sys.argv[1]
        for i in range(60):
            r = ChatRequest.of([{{"role": "user", "content": f"{{tag}}-{{i}}"}}], Sampling())
            cache.put_many([(cache_key("fake", "x", r), "fake", "x", ChatResponse(text=tag))])
            assert cache.get_many([cache_key("fake", "x", r)])
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, tag], stderr=subprocess.PIPE)
        for tag in ("a", "b", "c")
    ]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert len(ResponseCache(db)) == 180


def test_cached_responses_survive_faulty_first_run(tmp_path):
    """Entries from a run with failures: only the successes are cached; a re-run asks for the rest only."""
    db = tmp_path / "responses.sqlite"
    with MockOpenAIServer(faults=FaultPlan(permanent_rate=0.3, seed=2)) as server:
        llm = CachedLLM(
            openai_llm([server.base_url], tmp_path, max_retries=1, backoff_s=0.0),
            ResponseCache(db),
        )
        out = llm.generate(_requests(20))
        failed = sum(not r.ok for r in out)
        assert 0 < failed < 20
        calls = server.state.completions
        again = llm.generate(_requests(20))
        assert (
            server.state.completions - calls == 2 * failed
        )  # each failure retried once more, nothing else sent
        assert sum(r.cached for r in again) == 20 - failed
        llm.close()


def test_a_damaged_cache_is_set_aside_and_a_fresh_one_used(tmp_path, caplog):
    """A cache file truncated to a third (a crash on a full disk) names the file in the log, moves it
    aside and goes on with a fresh cache; the stage does not stop."""
    db = tmp_path / "responses.sqlite"
    cache = ResponseCache(db)
    requests = _requests(3000)
    keys = [cache_key("fake", "x", r) for r in requests]
    cache.put_many([(k, "fake", "x", ChatResponse(text="t" * 200)) for k in keys])
    cache.close()
    with open(db, "r+b") as fh:
        fh.truncate(db.stat().st_size // 3)
    with caplog.at_level("WARNING", logger="factory.llm.responses"):
        cache = ResponseCache(db)
        assert cache.get_many(keys) == {}  # nothing trusted from the damaged file
        cache.put_many([(keys[0], "fake", "x", ChatResponse(text="again"))])
        assert cache.get(keys[0]).text == "again" and len(cache) == 1
        cache.close()
    aside = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name and p.suffix != ".sqlite-wal"]
    assert aside and any(str(db) in r.getMessage() and "set aside" in r.getMessage() for r in caplog.records)
    assert ResponseCache(db).get(keys[0]).text == "again"


def test_entries_of_the_first_layout_are_kept(tmp_path):
    """A cache written before the compact layout (hex text keys in table `responses`) is moved over."""
    import json
    import sqlite3

    db = tmp_path / "responses.sqlite"
    key = cache_key("fake", "x", _requests(1)[0])
    old = sqlite3.connect(db)
    old.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, backend TEXT NOT NULL, identity TEXT NOT NULL, "
        "response TEXT NOT NULL, created REAL NOT NULL)"
    )
    record = {"text": "old", "prompt_tokens": 1, "completion_tokens": 2, "latency_s": 0.5}
    record["finish_reason"] = "stop"
    old.execute("INSERT INTO responses VALUES (?, ?, ?, ?, ?)", (key, "fake", "x", json.dumps(record), 0.0))
    old.commit()
    old.close()
    cache = ResponseCache(db)
    hit = cache.get(key)
    assert (hit.text, hit.latency_s, hit.cached) == ("old", 0.5, True) and len(cache) == 1
    cache.close()


def test_cache_keys_are_the_canonical_json_of_the_request():
    """The fast key is byte for byte the documented one: sha256 of json.dumps(sort_keys, compact) of
    backend, identity, messages, every sampling field, the sample index and the constraint's digest
    (so caches written before keep answering)."""
    import dataclasses
    import hashlib
    import json
    import random

    from factory.llm.base import Constraint

    def documented(backend, identity, request, via=""):
        payload = {
            "backend": backend,
            "identity": identity,
            "messages": [list(m) for m in request.messages],
            "sampling": {
                k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(request.sampling).items()
            },
            "sample": request.sample,
        }
        c = request.constraint
        if c is not None:
            forms = json.dumps([c.regex, c.gbnf, c.json_schema], ensure_ascii=False)
            payload["constraint"] = {
                "name": c.name,
                "sha256": hashlib.sha256(forms.encode("utf-8")).hexdigest(),
                "via": via,
            }
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    rng = random.Random(0)
    chars = 'abé漢\n\t"\\/\u2028\x01\x7f 😀<&'
    grammar = Constraint("v/explore/pairs=2", "Thought: .*", 'root ::= "x"', '{"type": "object"}')
    for i in range(500):
        text = "".join(rng.choice(chars) for _ in range(rng.randrange(60)))
        sampling = Sampling(
            temperature=rng.choice([0.0, 0.7, 1e-7, 0.1 + 0.2, 2.5e17]),
            top_p=rng.choice([1.0, 0.95]),
            max_new_tokens=96,
            seed=i,
            stop=("\nQuestion:", text[:3]),
        )
        request = ChatRequest.of(
            [{"role": "system", "content": text}, {"role": "user", "content": text[::-1]}],
            sampling,
            sample=i % 3,
            constraint=grammar if i % 2 else None,
        )
        assert cache_key("openai", f"m{text[:5]}", request, "openai:grammar") == documented(
            "openai", f"m{text[:5]}", request, "openai:grammar"
        )


def test_then_runs_once_the_replies_before_it_are_committed(tmp_path):
    """What must not reach the disk ahead of its replies (a journaled record) waits for their commit;
    a failed action is raised by the next flush, not lost on the writer's thread."""
    import sqlite3

    def _count(path) -> int:  # what another process sees on disk
        with sqlite3.connect(path) as db:
            return db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]

    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path, commit_window_s=0.05)
    seen: list[int] = []
    reply = ChatResponse(text="a", finish_reason="stop")
    for i in range(3):
        cache.put_many([(cache_key("fake", "fake:1", _requests(i + 1)[i]), "fake", "fake:1", reply)])
        cache.then(lambda: seen.append(_count(path)))
    cache.flush()
    assert len(seen) == 3 and all(n >= i + 1 for i, n in enumerate(seen))  # each after its replies

    def fails():
        raise OSError("disk full")

    cache.then(fails)
    try:
        cache.flush()
    except OSError as exc:
        assert "disk full" in str(exc)
    else:
        raise AssertionError("the action's error was lost")
    cache.close()


def test_streaming_wrapper_answers_hits_at_once_and_sends_a_request_in_flight_once(tmp_path):
    import asyncio

    class Streaming(Counting):
        def __init__(self):
            super().__init__()
            self.loop = asyncio.new_event_loop()

        async def acomplete(self, request):
            await asyncio.sleep(0.01)
            return self.generate([request])[0]

        def run(self, coroutine):
            return self.loop.run_until_complete(coroutine)

    inner = Streaming()
    llm = CachedLLM(inner, ResponseCache(tmp_path / "c.sqlite"))
    q0, q1 = _requests(2)

    async def ask(requests):
        return await asyncio.gather(*(llm.acomplete(r) for r in requests))

    first = llm.run(ask([q0, q1, q0]))
    assert [len(b) for b in inner.batches] == [1, 1]  # q0 twice at once: sent once
    assert [r.text for r in first] == ["q0#0", "q1#0", "q0#0"] and first[0] is not first[2]
    again = llm.run(ask([q0, q1]))
    assert len(inner.batches) == 2 and all(r.cached for r in again) and (llm.hits, llm.misses) == (2, 3)
    llm.close()
    inner.loop.close()
