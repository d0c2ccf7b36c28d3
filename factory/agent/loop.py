"""The KnowTrace agent loop (DESIGN §1), run for many trajectories in lockstep.

Each trajectory is a small generator program: it yields the LLM calls it needs next (one explore,
or one complete per pair) and receives their outcomes. The driver gathers the pending calls of
*every* active trajectory into one ``llm.generate`` batch per tick (one forward pass for the local
backend, concurrent requests for the openai backend), parses the replies, re-asks unparseable
ones with the parse error (``agent.repair_attempts``) in the next tick, and resumes a program once
all of its calls are settled. The programs, not the driver, hold the KnowTrace logic:

explore -> (sufficient: answer) | pairs -> retrieve + complete per pair -> keep all new triplets
-> repeat up to ``agent.max_iterations``; stop on no new triplet, a parse error after the repairs,
or an LLM error; a forced final call answers from G when no answer was given.

Every call is a recorded step; every triplet is grounded in its step's retrieved passages. The
result is one Trajectory record (``schemas.TRAJECTORY``) per question x sample, whatever happens.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from factory.agent import prompts
from factory.agent.format import ParseError, parse_complete, parse_explore, parse_final
from factory.errors import FactoryError
from factory.llm.base import LLM, ChatRequest, ChatResponse, Sampling
from factory.metrics import exact_match, f1
from factory.text import join_sentences, normalize_answer

STATUSES = ("ok", "max_iterations", "parse_error", "llm_error")
STOP_REASONS = ("sufficient", "no_new_triplets", "max_iterations", "parse_error", "llm_error")


# ---------------------------------------------------------------- ids and guards


def trajectory_id(run: str, question_id: str, sample: int, rationalized: bool = False) -> str:
    """Stable id: the run (e.g. ``backtrace/seed_0/round_1``), the question, the sample index."""
    return f"{run}/{question_id}/k{sample}" + ("/rationalized" if rationalized else "")


# ---------------------------------------------------------------- calls and outcomes


@dataclass
class Outcome:
    """One step's LLM call after its repairs: what the step record is built from."""

    status: str  # ok | parse_error | llm_error
    parsed: Any
    output: str  # raw text of the accepted (or last) attempt
    error: str | None
    messages: list[dict]  # recorded (hint-free) prompt of that attempt
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float  # as first measured: a cache hit replays the recorded latency


@dataclass
class _Call:
    kind: str
    sent: list[dict]  # first-attempt prompt as sent (may carry the hint)
    recorded: list[dict]  # the same prompt without the hint
    parse: Callable[[str], Any]
    current_sent: list[dict] = field(default_factory=list)
    current_recorded: list[dict] = field(default_factory=list)
    attempts: int = 0
    outcome: Outcome | None = None

    def __post_init__(self) -> None:
        self.current_sent, self.current_recorded = self.sent, self.recorded


@dataclass
class _Tally:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    def add(self, r: ChatResponse) -> None:
        self.calls += 1
        self.prompt_tokens += int(r.prompt_tokens or 0)
        self.completion_tokens += int(r.completion_tokens or 0)
        self.latency_s += float(r.latency_s or 0.0)


@dataclass
class _Job:
    index: int
    question: dict
    sample: int
    tid: str
    program: Generator[list[_Call], list[Outcome], dict]
    tally: _Tally
    calls: list[_Call] = field(default_factory=list)


def _settle(call: _Call, response: ChatResponse, version: str, repair_attempts: int) -> None:
    """Accept, re-ask (repair) or fail one call from its latest response."""
    call.attempts += 1
    text = response.text or ""

    def done(status: str, parsed: Any, error: str | None) -> None:
        call.outcome = Outcome(
            status,
            parsed,
            text,
            error,
            call.current_recorded,
            call.attempts,
            int(response.prompt_tokens or 0),
            int(response.completion_tokens or 0),
            float(response.latency_s or 0.0),
        )

    if response.error is not None:
        done("llm_error", None, str(response.error) or "unknown LLM error")
        return
    try:
        parsed = call.parse(text)
    except ParseError as exc:
        if call.attempts <= repair_attempts:
            call.current_sent = prompts.repair_messages(version, call.sent, text, str(exc))
            call.current_recorded = prompts.repair_messages(version, call.recorded, text, str(exc))
            return
        done("parse_error", None, str(exc))
        return
    done("ok", parsed, None)


# ---------------------------------------------------------------- one trajectory


@dataclass
class _Context:
    """What every trajectory program of one run shares."""

    params: Any
    retriever: Any
    passages: Mapping[str, Mapping]
    version: str
    ground: Callable


def _passage_text(p: Mapping) -> str:
    return p.get("text") or join_sentences(list(p.get("sentences") or []))


def _step(index: int, kind: str, out: Outcome, **fields: Any) -> dict:
    return {
        "index": index,
        "kind": kind,
        "messages": [dict(m) for m in out.messages],
        "output": out.output,
        "status": out.status,
        "error": out.error,
        "sufficient": fields.get("sufficient"),
        "thought": fields.get("thought"),
        "answer": fields.get("answer"),
        "pairs": fields.get("pairs", []),
        "pair_id": fields.get("pair_id"),
        "retrieved": fields.get("retrieved", []),
        "triplet_ids": fields.get("triplet_ids", []),
        "attempts": out.attempts,
        "prompt_tokens": out.prompt_tokens,
        "completion_tokens": out.completion_tokens,
        "latency_s": out.latency_s,
    }


def _program(
    ctx: _Context, q: dict, tid: str, hint: str | None
) -> Generator[list[_Call], list[Outcome], dict]:
    """The KnowTrace loop for one question; returns the trajectory's fields (without run metadata)."""
    a, version = ctx.params.agent, ctx.version
    question = q["question"]
    pool = [p["pid"] for p in q.get("passages") or []] if ctx.params.index.scope == "question" else None
    steps: list[dict] = []
    triplets: list[dict] = []
    seen: set[tuple[str, str, str]] = set()
    pair_count = 0
    failure: tuple[str, str] | None = None  # (status, reason) of the first failed step
    stop_reason = "max_iterations"
    answer = thought = None

    def graph() -> list[tuple[str, str, str]]:
        return [(t["subject"], t["relation"], t["object"]) for t in triplets]

    def fail(out: Outcome) -> None:
        nonlocal failure
        if failure is None and out.status != "ok":
            failure = (out.status, f"step {len(steps) - 1} ({steps[-1]['kind']}): {out.error}")

    for _iteration in range(a.max_iterations):
        sent = prompts.explore_messages(version, question, graph(), hint)
        recorded = prompts.explore_messages(version, question, graph()) if hint is not None else sent
        (out,) = yield [_Call("explore", sent, recorded, lambda text: parse_explore(text, a.max_pairs))]
        if out.status != "ok":
            steps.append(_step(len(steps), "explore", out))
            fail(out)
            break
        ex = out.parsed
        if ex.sufficient:
            steps.append(
                _step(len(steps), "explore", out, sufficient=True, thought=ex.thought, answer=ex.answer)
            )
            answer, thought, stop_reason = ex.answer, ex.thought, "sufficient"
            break
        pairs = []
        for entity, relation in ex.pairs:
            pair_count += 1
            pairs.append({"pair_id": f"{tid}#p{pair_count}", "entity": entity, "relation": relation})
        steps.append(_step(len(steps), "explore", out, sufficient=False, thought=ex.thought, pairs=pairs))

        calls, shown = [], []
        for pair in pairs:
            query = f"{pair['entity']} {pair['relation']}"
            if ctx.params.retrieval.query_with_question:
                query = f"{query} {question}"
            hits = ctx.retriever.search(query, q["dataset"], ctx.params.retrieval.top_n, pool)
            retrieved = []
            for hit in hits:
                if hit.pid not in ctx.passages:
                    raise FactoryError(
                        f"question {q['question_id']!r}: retrieved passage {hit.pid!r} is not among the "
                        "passages given to the agent"
                    )
                retrieved.append(ctx.passages[hit.pid])
            shown.append(retrieved)
            msgs = prompts.complete_messages(
                version,
                question,
                pair["entity"],
                pair["relation"],
                [(p["title"], _passage_text(p)) for p in retrieved],
                a.passage_chars,
            )
            calls.append(_Call("complete", msgs, msgs, parse_complete))
        outs = yield calls

        added = 0
        for pair, retrieved, out in zip(pairs, shown, outs):
            index = len(steps)
            new_ids = []
            for subject, relation, obj in out.parsed or []:
                key = (normalize_answer(subject), normalize_answer(relation), normalize_answer(obj))
                if key in seen:
                    continue
                seen.add(key)
                g = ctx.ground(subject, relation, obj, retrieved, a.grounding_threshold)
                triplet_id = f"{tid}#t{len(triplets) + 1}"
                triplets.append(
                    {
                        "triplet_id": triplet_id,
                        "step_index": index,
                        "pair_id": pair["pair_id"],
                        "subject": subject,
                        "relation": relation,
                        "object": obj,
                        "source_pid": g.pid,
                        "source_sentence": g.sentence,
                        "grounding_score": float(g.score),
                    }
                )
                new_ids.append(triplet_id)
            added += len(new_ids)
            steps.append(
                _step(
                    index,
                    "complete",
                    out,
                    pair_id=pair["pair_id"],
                    retrieved=[p["pid"] for p in retrieved],
                    triplet_ids=new_ids,
                )
            )
            fail(out)
        if failure is not None:
            break
        if added == 0:
            stop_reason = "no_new_triplets"
            break

    if failure is not None:
        stop_reason = failure[0]
    if answer is None:
        sent = prompts.final_messages(version, question, graph(), hint)
        recorded = prompts.final_messages(version, question, graph()) if hint is not None else sent
        (out,) = yield [_Call("final", sent, recorded, parse_final)]
        if out.status == "ok":
            answer, thought = out.parsed.answer, out.parsed.thought
            steps.append(_step(len(steps), "final", out, thought=thought, answer=answer))
        else:
            steps.append(_step(len(steps), "final", out))
            fail(out)
    if failure is not None:
        status, error = failure
    else:
        status, error = ("max_iterations" if stop_reason == "max_iterations" else "ok"), None
    return {
        "status": status,
        "error": error,
        "stop_reason": stop_reason,
        "answer": answer,
        "final_thought": thought,
        "steps": steps,
        "triplets": triplets,
    }


# ---------------------------------------------------------------- the driver


def run_trajectories(
    questions: Sequence[dict],
    llm: LLM,
    retriever: Any,
    params: Any,
    policy: Any,
    round_: int,
    samples: int | Sequence[int],
    sampling: Sampling,
    on_done: Callable[[dict], None] | None = None,
    *,
    passages: Mapping[str, Mapping] | None = None,
    run_id: str | None = None,
    rationalized: bool = False,
) -> list[dict]:
    """Run one trajectory per question x sample, all in lockstep; records in (question, sample) order.

    ``samples``: how many per question (or the sample indices). ``policy``: a ``factory.agent.policy.Policy``
    (its name is recorded; a scripted LLM records ``scripted``). ``passages``: pid -> passage for pooled
    retrieval (default: the questions' own pools). ``run_id`` prefixes trajectory ids (default
    ``<policy>/round_<r>``). ``rationalized``: give each trajectory the gold answer as a hint; the
    recorded prompts stay hint-free. ``on_done`` gets each record as soon as it is finished.
    """
    from factory.agent.grounding import ground_triplet  # imported here: the loop module stays light to import

    sample_ids = list(range(samples)) if isinstance(samples, int) else [int(s) for s in samples]
    pool: dict[str, Mapping] = {}
    for q in questions:
        for p in q.get("passages") or []:
            pool.setdefault(p["pid"], p)
    if passages is not None:
        pool = {**pool, **passages}
    ctx = _Context(params, retriever, pool, params.agent.prompt_version, ground_triplet)
    stop = prompts.prompt_set(ctx.version).stop  # unknown version: fail before any call
    sampling = replace(sampling, stop=tuple(dict.fromkeys((*sampling.stop, *stop))))
    recorded_policy = "scripted" if getattr(llm, "backend", "") == "scripted" else policy.name
    run = run_id or f"{recorded_policy}/round_{round_}"

    jobs: list[_Job] = []
    for q in questions:
        for s in sample_ids:
            tid = trajectory_id(run, q["question_id"], s, rationalized)
            hint = (q.get("answers") or [None])[0] if rationalized else None
            if rationalized and not hint:
                raise FactoryError(
                    f"question {q['question_id']!r}: rationalization needs a gold answer (field "
                    "'answers' is empty)"
                )
            jobs.append(_Job(len(jobs), q, s, tid, _program(ctx, q, tid, hint), _Tally()))
    results: list[dict | None] = [None] * len(jobs)

    def finish(job: _Job, fields: dict) -> None:
        q = job.question
        record = {
            "trajectory_id": job.tid,
            "question_id": q["question_id"],
            "dataset": q["dataset"],
            "split": q["split"],
            "qtype": q["qtype"],
            "route": q["route"],
            "policy": recorded_policy,
            "round": int(round_),
            "sample": job.sample,
            "seed": int(sampling.seed),
            "question": q["question"],
            "answers": list(q["answers"]),
            "prompt_version": ctx.version,
            "model": str(llm.identity),
            **fields,
            "em": exact_match(fields["answer"], q["answers"]) if fields["answer"] is not None else 0.0,
            "f1": f1(fields["answer"], q["answers"]) if fields["answer"] is not None else 0.0,
            "rationalized": bool(rationalized),
            "llm_calls": job.tally.calls,
            "prompt_tokens": job.tally.prompt_tokens,
            "completion_tokens": job.tally.completion_tokens,
            "latency_s": job.tally.latency_s,
        }
        record["correct"] = record["em"] == 1.0
        results[job.index] = record
        if on_done is not None:
            on_done(record)

    active: list[_Job] = []
    for job in jobs:
        job.calls = next(job.program)
        active.append(job)
    while active:
        pending = [(job, call) for job in active for call in job.calls if call.outcome is None]
        requests = [ChatRequest.of(call.current_sent, sampling, job.sample) for job, call in pending]
        responses = llm.generate(requests)
        if len(responses) != len(requests):
            raise FactoryError(
                f"LLM backend {llm.backend!r} returned {len(responses)} responses for {len(requests)} "
                "requests"
            )
        for (job, call), response in zip(pending, responses):
            job.tally.add(response)
            _settle(call, response, ctx.version, params.agent.repair_attempts)
        still: list[_Job] = []
        for job in active:
            if any(call.outcome is None for call in job.calls):
                still.append(job)
                continue
            try:
                job.calls = job.program.send([call.outcome for call in job.calls])
                still.append(job)
            except StopIteration as stop:
                finish(job, stop.value)
        active = still
    return [r for r in results if r is not None]
