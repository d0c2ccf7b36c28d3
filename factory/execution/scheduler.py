"""Continuous scheduling for served models: every trajectory advances as soon as its own calls settle.

The lockstep driver (``factory.agent.loop.run_trajectories``) waits for the slowest call of a tick
before any trajectory moves on; against a server whose completion times vary tenfold with output
length, the endpoints then sit idle most of the time. Here each trajectory's program sends its
next calls the moment its previous ones are settled, through ``llm.submit`` (the openai backend
keeps at most ``llm.concurrency`` requests in flight; the rest wait in its queue), over a window
of active trajectories much larger than the concurrency, so the queue never runs dry. A finished
trajectory is handed to ``on_done`` at once (the caller checkpoints it), and a freed place in
the window goes to the next trajectory of the plan.

The records do not depend on the schedule: a trajectory's record is built from the replies to its
own calls only (``factory.agent.loop.Run``), and the caller assembles the final file in plan order.
Parsing, retrieval and grounding run in the caller's thread; HTTP runs in the backend's thread.
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from factory.agent.loop import Run
from factory.agent.program import Call, Job
from factory.errors import FactoryError


def run_continuously(
    run: Run,
    units: Iterable[tuple[dict, int, bool]],
    window: int,
    on_done: Callable[[dict], Iterable[tuple[dict, int, bool]] | None],
) -> int:
    """Run a trajectory for every (question, sample, rationalized) unit; return how many ran.

    At most ``window`` trajectories are active at once. ``on_done(record)`` gets each record as soon
    as its trajectory finishes and may return more units to run (a rationalization once all samples
    of a question are wrong); they join the queue ahead of the plan's remaining units.
    """
    llm: Any = run.llm
    if not hasattr(llm, "submit"):
        raise FactoryError(f"LLM backend {llm.backend!r} cannot take single requests (no submit)")
    if window < 1:
        raise FactoryError(f"the scheduling window must be >= 1 (got {window})")
    plan = iter(units)
    extra: deque[tuple[dict, int, bool]] = deque()
    settled: queue.SimpleQueue = queue.SimpleQueue()  # (job, call, future), filled by the backend's thread
    active = finished = 0

    def send(job: Job, call: Call) -> None:
        future = llm.submit(job.request(call, run.sampling))
        future.add_done_callback(lambda f, job=job, call=call: settled.put((job, call, f)))

    def advance(job: Job, outcomes: list | None) -> bool:
        """Start or resume ``job``'s program; send its next calls. False when it has finished."""
        nonlocal finished
        try:
            job.calls = next(job.program) if outcomes is None else job.program.send(outcomes)
        except StopIteration as stop:
            finished += 1
            more = on_done(run.record(job, stop.value))
            extra.extend(more or ())
            return False
        if not job.calls:
            raise FactoryError(f"trajectory {job.tid}: its program asked for no call")
        job.pending = len(job.calls)
        for call in job.calls:
            send(job, call)
        return True

    def fill() -> None:
        nonlocal active
        while active < window:
            unit = extra.popleft() if extra else next(plan, None)
            if unit is None:
                return
            q, sample, rationalized = unit
            if advance(run.job(q, sample, rationalized), None):
                active += 1

    fill()
    while active:
        job, call, future = settled.get()
        response = future.result()  # a backend reports a failed call as an error response, never raises
        run.settle(job, call, response)
        if call.outcome is None:  # unparseable: re-asked with the parse error
            send(job, call)
            continue
        job.pending -= 1
        if job.pending:
            continue
        if not advance(job, [c.outcome for c in job.calls]):
            active -= 1
            fill()
    return finished
