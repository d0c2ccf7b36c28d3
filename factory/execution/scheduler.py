"""Continuous scheduling for served models: every trajectory advances as soon as its own calls settle.

The lockstep driver (``factory.agent.loop.run_trajectories``) waits for the slowest call of a tick
before any trajectory moves on; against a server whose completion times vary tenfold with output
length, the endpoints then sit idle most of the time. Here each trajectory's program sends its
next calls the moment its previous ones are settled (``await llm.acomplete``: the openai backend
keeps at most ``llm.concurrency`` requests in flight; the rest wait for a slot), over a window of
active trajectories much larger than the concurrency, so the queue never runs dry. A finished
trajectory is handed to ``on_done`` at once (the caller checkpoints it), and a freed place in
the window goes to the next trajectory of the plan.

Everything runs as one coroutine on the backend's event loop (``llm.run``): parsing, retrieval and
grounding share the thread with the HTTP. Handing each reply to another thread and each request
back cost more factory CPU than the rest of a call (a wake-up and a GIL hand-off each way).

The records do not depend on the schedule: a trajectory's record is built from the replies to its
own calls only (``factory.agent.loop.Run``), and the caller assembles the final file in plan order.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from factory.agent.loop import Run
from factory.agent.program import Call, Job, Outcome
from factory.utils.errors import FactoryError

Unit = tuple[dict, int, bool]  # (question, sample, rationalized)


def run_continuously(
    run: Run,
    units: Iterable[Unit],
    window: int,
    on_done: Callable[[dict], Iterable[Unit] | None],
) -> int:
    """Run a trajectory for every (question, sample, rationalized) unit; return how many ran.

    At most ``window`` trajectories are active at once. ``on_done(record)`` gets each record as soon
    as its trajectory finishes (on the backend's loop) and may return more units to run (a
    rationalization once all samples of a question are wrong); they join the queue ahead of the
    plan's remaining units. The first error (of a trajectory or of ``on_done``) stops the run.
    """
    llm: Any = run.llm
    if not hasattr(llm, "acomplete"):
        raise FactoryError(f"LLM backend {llm.backend!r} cannot take single requests (no acomplete)")
    if window < 1:
        raise FactoryError(f"the scheduling window must be >= 1 (got {window})")
    return llm.run(_schedule(run, iter(units), window, on_done))


async def _ask(run: Run, job: Job, call: Call) -> Outcome:
    """One call's outcome; an unparseable reply is re-asked with the parse error."""
    while True:
        response = await run.llm.acomplete(job.request(call, run.sampling))
        run.settle(job, call, response)
        if call.outcome is not None:
            return call.outcome


async def _trajectory(run: Run, job: Job) -> dict:
    """Drive ``job``'s program to its end; its record."""
    outcomes: list[Outcome] | None = None
    while True:
        try:
            job.calls = next(job.program) if outcomes is None else job.program.send(outcomes)
        except StopIteration as stop:
            return run.record(job, stop.value)
        if not job.calls:
            raise FactoryError(f"trajectory {job.tid}: its program asked for no call")
        if len(job.calls) == 1:  # most steps: no task of its own
            outcomes = [await _ask(run, job, job.calls[0])]
        else:
            outcomes = list(await asyncio.gather(*(_ask(run, job, c) for c in job.calls)))


async def _schedule(
    run: Run, plan: Iterator[Unit], window: int, on_done: Callable[[dict], Iterable[Unit] | None]
) -> int:
    loop = asyncio.get_running_loop()
    extra: deque[Unit] = deque()
    active: set[asyncio.Task] = set()
    finished = loop.create_future()  # done when the last trajectory is, or with the first error
    count = 0

    def fill() -> None:
        while len(active) < window:
            unit = extra.popleft() if extra else next(plan, None)
            if unit is None:
                break
            q, sample, rationalized = unit
            task = loop.create_task(_trajectory(run, run.job(q, sample, rationalized)))
            active.add(task)
            task.add_done_callback(settled)
        if not active and not finished.done():
            finished.set_result(None)

    def settled(task: asyncio.Task) -> None:
        nonlocal count
        active.discard(task)
        if finished.done():  # stopping: the others are being cancelled
            return
        if task.cancelled():
            finished.cancel()
            return
        try:
            record = task.result()
            count += 1
            extra.extend(on_done(record) or ())
            fill()
        except BaseException as exc:  # noqa: BLE001 — handed to the caller of run_continuously
            finished.set_exception(exc)

    try:
        fill()
        await finished
    finally:
        for task in active:
            task.cancel()
        if active:
            await asyncio.gather(*active, return_exceptions=True)
    return count
