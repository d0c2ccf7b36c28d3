"""Headless Chromium (Debian's ``chromium``) driven over the Chrome DevTools protocol, for tests that
check what a real browser makes of a page: console errors, what it laid out, a screenshot. The fixture
skips, saying why, where the browser is missing (.ci/run installs it)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("FACTORY_CHROMIUM", "/usr/bin/chromium")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DevTools:
    """A minimal Chrome DevTools protocol client over one page's websocket."""

    def __init__(self, url: str):
        from websockets.sync.client import connect

        self.ws = connect(url, max_size=64 * 2**20, open_timeout=20)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            self.events.append(json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))))


class NoBrowser(RuntimeError):
    """Chromium did not start."""


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[DevTools]:
    """Headless Chromium with a fresh profile folder, and a DevTools client on its page."""
    port = _free_port()
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--hide-scrollbars",
         f"--remote-debugging-port={port}", "--remote-allow-origins=*", "--window-size=1200,900",
         "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline, pages = time.monotonic() + 30, []
        while not pages:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise NoBrowser(f"chromium did not open its DevTools port (exit code {proc.poll()})")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    pages = [p for p in json.load(r) if p.get("type") == "page"]
            except OSError:
                time.sleep(0.2)
        client = DevTools(pages[0]["webSocketDebuggerUrl"])
        yield client
        client.ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def browser(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (.ci/run does) for the browser check")
    try:
        with chromium(tmp_path / "chromium-profile") as client:
            yield client
    except NoBrowser as exc:
        pytest.fail(str(exc))


def console_errors(client: DevTools) -> list[dict]:
    """Console errors, uncaught exceptions and error log entries (failed loads) seen so far."""
    return [
        e for e in client.events
        if (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
        or e.get("method") == "Runtime.exceptionThrown"
        or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
    ]  # fmt: skip


def load(client: DevTools, url: str) -> None:
    """Navigate and wait for the load event, with console and log events recorded."""
    for domain in ("Page", "Runtime", "Log"):
        client.call(f"{domain}.enable")
    client.call("Page.navigate", url=url)
    client.wait_for("Page.loadEventFired")


def evaluate(client: DevTools, expression: str):
    return client.call("Runtime.evaluate", expression=expression, awaitPromise=True)["result"].get("value")
