"""An HTTP proxy that injects faults in front of a real OpenAI-compatible server (integration tests).

Chat completion requests (``POST .../chat/completions``) get a fault with probability ``rate``, per
(request body, attempt) from a seeded hash; the kinds are dealt in turn (``KINDS``), so a run with
at least five faults sees each of them:

- ``429`` / ``500``: an error reply, the server never sees the request;
- ``hung``: the proxy holds the connection for ``hang_s`` (longer than the client's timeout), then
  closes it;
- ``truncated``: the server's reply is cut in the middle of its body and the connection closed;
- ``dropped``: the connection is closed right after the request arrived, with no reply.

Everything else is forwarded as is. Every request is answered with ``Connection: close``.
``counts`` holds what happened (chat requests seen, forwarded, and faults by kind).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from urllib.parse import urlsplit

KINDS = ("429", "500", "hung", "truncated", "dropped")


def _unit(*parts: object) -> float:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "big") / 2**64


class FaultProxy:
    def __init__(self, upstream: str, rate: float = 0.3, seed: int = 0, hang_s: float = 30.0):
        u = urlsplit(upstream)
        self.host, self.port_up = u.hostname, u.port
        self.prefix = u.path.rstrip("/")  # e.g. /v1
        self.rate, self.seed, self.hang_s = rate, seed, hang_s
        self.counts: Counter = Counter()
        self._attempts: Counter = Counter()
        self._dealt = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def _fault(self, body: bytes) -> str | None:
        key = hashlib.sha256(body).hexdigest()
        attempt = self._attempts[key]
        self._attempts[key] += 1
        if _unit(self.seed, key, attempt) >= self.rate:
            return None
        kind = KINDS[self._dealt % len(KINDS)]
        self._dealt += 1
        return kind

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
            length = next((int(v) for k, v in headers if k.strip().lower() == "content-length"), 0)
            body = await reader.readexactly(length) if length else b""
            fault = None
            if method == "POST" and path.endswith("/chat/completions"):
                self.counts["chat"] += 1
                fault = self._fault(body)
            if fault is not None:
                self.counts[fault] += 1
            if fault in ("429", "500"):
                text = b'{"error": {"message": "injected fault", "type": "proxy"}}'
                status = b"429 Too Many Requests" if fault == "429" else b"500 Internal Server Error"
                writer.write(
                    b"HTTP/1.1 "
                    + status
                    + b"\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(text)).encode()
                    + b"\r\nConnection: close\r\n\r\n"
                    + text
                )
                await writer.drain()
                return
            if fault == "dropped":
                return
            if fault == "hung":
                await asyncio.sleep(self.hang_s)
                return
            kept = [(k, v) for k, v in headers if k.strip().lower() not in ("connection", "host")]
            request = (
                "\r\n".join(
                    [lines[0], f"Host: {self.host}:{self.port_up}", "Connection: close"]
                    + [f"{k}:{v}" for k, v in kept]
                ).encode("latin-1")
                + b"\r\n\r\n"
                + body
            )
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port_up)
            up_writer.write(request)
            await up_writer.drain()
            reply = await up_reader.read()  # the server closes after its reply (Connection: close)
            up_writer.close()
            if path.endswith("/chat/completions"):
                self.counts["forwarded"] += 1
            if fault == "truncated":
                split = reply.find(b"\r\n\r\n") + 4
                reply = reply[: split + max(1, (len(reply) - split) // 2)]
            writer.write(reply)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()
