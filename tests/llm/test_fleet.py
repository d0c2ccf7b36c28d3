"""The fleet of endpoints: fewest in flight, a trajectory kept on its endpoint, a failing endpoint out of
rotation and probed back."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

from factory.llm.base import ChatRequest, Sampling
from factory.llm.fleet import Fleet
from factory.llm.openai_backend import OpenAILLM
from factory.params.agent_sections import LLMParams
from tests.mock_openai_server import MockOpenAIServer, openai_llm


def test_fewest_in_flight_and_the_bound_per_endpoint():
    fleet = Fleet(["a", "b", "c"], per_url=2, routing="fewest_in_flight")
    a, b, c = fleet.endpoints
    a.in_flight, b.in_flight, c.in_flight = 1, 0, 2
    assert fleet.choose() is b
    b.in_flight = 2
    assert fleet.choose() is a  # c and b are at their bound
    a.in_flight = 2
    assert fleet.choose() is None  # no room anywhere: the request waits


def test_a_trajectory_stays_on_its_endpoint_while_that_holds_its_share():
    fleet = Fleet(["a", "b"], per_url=None, routing="fewest_in_flight")
    a, b = fleet.endpoints
    assert fleet.choose("t1") is a
    a.in_flight = 2
    assert fleet.choose("t2") is b  # a new trajectory goes to the least loaded
    assert fleet.choose("t1") is a  # t1 stays: 2 in flight is within the slack over b's 0
    a.in_flight = 9
    assert fleet.choose("t1") is b  # too far over its share: moved, and remembered there
    a.in_flight = 0
    assert fleet.choose("t1") is b


def test_an_endpoint_failing_in_a_row_leaves_the_rotation_and_its_probe_brings_it_back(caplog):
    async def scenario():
        answers = {"b": False}

        async def probe(url):
            return answers[url]

        fleet = Fleet(["a", "b"], per_url=None, routing="fewest_in_flight", probe_every_s=0.01, probe=probe)
        a, b = fleet.endpoints
        for failed in (True, True, False, True, True):  # a success resets the count
            b.in_flight += 1
            await fleet.release(b, failed=failed)
        assert b.healthy
        b.in_flight += 1
        await fleet.release(b, failed=True)  # the third in a row
        assert not b.healthy
        a.in_flight = 50
        assert fleet.choose() is a  # out of rotation, however idle
        answers["b"] = True
        for _ in range(200):
            await asyncio.sleep(0.01)
            if b.healthy:
                break
        assert b.healthy and fleet.choose() is b
        fleet.close()

    with caplog.at_level(logging.INFO, logger="factory.llm.fleet"):
        asyncio.run(scenario())
    messages = [r.getMessage() for r in caplog.records]
    assert any("b is out of rotation after 3 failed attempts in a row" in m for m in messages)
    assert any("b is back in rotation" in m for m in messages)


def _requests(n: int) -> list[ChatRequest]:
    return [
        ChatRequest.of(
            [{"role": "user", "content": f"q{i}"}], Sampling(max_new_tokens=8), affinity=f"t{i % 7}"
        )
        for i in range(n)
    ]


def test_the_backend_routes_around_a_dead_endpoint_and_takes_it_back(tmp_path, caplog):
    """One endpoint refuses connections: every request still gets its reply (from the other), the dead
    one leaves the rotation after a few attempts, and once a server listens there again it comes back."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    with MockOpenAIServer() as alive, caplog.at_level(logging.INFO, logger="factory.llm.fleet"):
        cfg = LLMParams(
            base_urls=[alive.base_url, f"http://127.0.0.1:{dead_port}/v1"],
            model="mock-model",
            api_key_env="FACTORY_TEST_FLEET_KEY",
            concurrency=4,
            max_retries=5,
            backoff_s=0.01,
        )
        llm = OpenAILLM(cfg, registry_path=tmp_path / "lora_names.json", probe_every_s=0.05)
        first = llm.generate(_requests(40))
        assert all(r.ok for r in first) and alive.state.completions == 40
        dead = llm._fleet.endpoints[1]
        assert not dead.healthy and dead.sent <= 4  # three failed attempts (a fourth may have been under way)
        with MockOpenAIServer(port=dead_port) as revived:
            deadline = time.monotonic() + 10
            while not dead.healthy and time.monotonic() < deadline:
                time.sleep(0.05)
            assert dead.healthy
            assert all(r.ok for r in llm.generate(_requests(40)))
            assert revived.state.completions > 0  # back in rotation: it takes its share again
        llm.close()
    assert any("out of rotation" in r.getMessage() for r in caplog.records)
    assert any("back in rotation" in r.getMessage() for r in caplog.records)


def test_the_mock_server_serves_at_most_its_capacity_at_once(tmp_path):
    """The mock's ``capacity`` (bench/fleet.py's endpoints): C calls served at once, the others queue."""
    with MockOpenAIServer(latency_s=0.1, capacity=2) as server:
        llm = openai_llm([server.base_url], tmp_path, api_key_env="FACTORY_TEST_FLEET_KEY", concurrency=6)
        start = time.perf_counter()
        out = llm.generate(_requests(6))
        wall = time.perf_counter() - start
        llm.close()
    assert all(r.ok for r in out)
    assert wall >= 0.3  # three rounds of two calls; without the bound all six take 0.1 s together
