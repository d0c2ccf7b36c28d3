"""One trajectory as a program: the KnowTrace loop (docs/design.md §1) for one question, driven by a driver.

``program`` is a generator: it yields the LLM calls it needs next (one explore, or one complete
per pair, or the forced final) as ``Call`` objects and receives their ``Outcome`` once every call is
settled (``settle``: accepted, re-asked with the parse error, or failed). It holds the logic:

explore -> (sufficient: answer) | pairs -> retrieve + complete per pair -> keep all new triplets
-> repeat up to ``agent.max_iterations``; stop on no new triplet, a parse error after the repairs,
or an LLM error; a forced final call answers from G when no answer was given.

The drivers are in ``factory.agent.loop`` (lockstep batches) and ``factory.execution.scheduler``
(continuous); a program never knows which one runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from factory.agent import prompts
from factory.agent.fields import ParseError
from factory.agent.step_record import EMPTY, Outcome, step_record
from factory.llm.base import ChatRequest, ChatResponse, Constraint, Sampling
from factory.utils.errors import FactoryError
from factory.utils.text import join_sentences, normalize_answer

STATUSES = ("ok", "max_iterations", "parse_error", "llm_error")
STOP_REASONS = ("sufficient", "no_new_triplets", "max_iterations", "parse_error", "llm_error")


# ---------------------------------------------------------------- ids and guards


def trajectory_id(run: str, question_id: str, sample: int, rationalized: bool = False) -> str:
    """Stable id: the run (e.g. ``backtrace/seed_0/round_1``), the question, the sample index."""
    return f"{run}/{question_id}/k{sample}" + ("/rationalized" if rationalized else "")


# ---------------------------------------------------------------- calls and outcomes


@dataclass
class Call:
    kind: str
    sent: list[dict]  # first-attempt prompt as sent (may carry the hint)
    recorded: list[dict]  # the same prompt without the hint
    parse: Callable[[str], Any]
    constraint: Constraint | None = None
    current_sent: list[dict] = field(default_factory=list)
    current_recorded: list[dict] = field(default_factory=list)
    attempts: int = 0
    outcome: Outcome | None = None
    replies: list[str] = field(default_factory=list)  # the response cache's keys of its attempts

    def __post_init__(self) -> None:
        self.current_sent, self.current_recorded = self.sent, self.recorded


@dataclass
class Tally:
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
class Job:
    index: int
    question: dict
    sample: int
    tid: str
    program: Generator[list[Call], list[Outcome], dict]
    tally: Tally
    rationalized: bool = False
    calls: list[Call] = field(default_factory=list)

    def request(self, call: Call, sampling: Sampling) -> ChatRequest:
        return ChatRequest.of(call.current_sent, sampling, self.sample, call.constraint, affinity=self.tid)


def settle(call: Call, response: ChatResponse, version: str, repair_attempts: int) -> None:
    """Accept, re-ask (repair) or fail one call from its latest response."""
    call.attempts += 1
    if response.cache_key is not None:
        call.replies.append(response.cache_key)
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
    if not text.strip() and response.finish_reason != "length":
        # a fault of the call, not of the format: the backends retry it as the same request; a
        # repair prompt would only invite chatter ("You're right, I'll keep that in mind ...")
        done("llm_error", None, EMPTY)
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
class Context:
    """What every trajectory program of one run shares."""

    params: Any
    retriever: Any
    passages: Mapping[str, Mapping]
    version: str
    ground: Callable
    fmt: Any = None  # prompts.output_format(version)
    constraints: Mapping[str, Constraint] | None = None  # per step kind, when decoding is constrained

    def call(self, kind: str, sent: list[dict], recorded: list[dict], parse: Callable[[str], Any]) -> Call:
        return Call(kind, sent, recorded, parse, self.constraints[kind] if self.constraints else None)


def _passage_text(p: Mapping) -> str:
    return p.get("text") or join_sentences(list(p.get("sentences") or []))


def _rejected(parsed: Any) -> str | None:
    """The lines of a completion that were not triplets, with why (kept in the step's ``error``)."""
    rejected = getattr(parsed, "rejected", None)
    return "lines not read as triplets: " + " | ".join(rejected) if rejected else None


@dataclass
class _Trajectory:
    """What one trajectory's program builds up: its steps, the graph G and the first failure."""

    tid: str
    steps: list[dict] = field(default_factory=list)
    triplets: list[dict] = field(default_factory=list)
    seen: set[tuple[str, str, str]] = field(default_factory=set)  # normalized triplets already in G
    pair_count: int = 0
    failure: tuple[str, str] | None = None  # (status, reason) of the first failed step

    def graph(self) -> list[tuple[str, str, str]]:
        return [(t["subject"], t["relation"], t["object"]) for t in self.triplets]

    def record(self, kind: str, out: Outcome, **fields: Any) -> None:
        self.steps.append(step_record(len(self.steps), kind, out, **fields))

    def fail(self, out: Outcome) -> None:
        """Keep the first failed step (the last one recorded) as the trajectory's failure."""
        if self.failure is None and out.status != "ok":
            self.failure = (out.status, f"step {len(self.steps) - 1} ({self.steps[-1]['kind']}): {out.error}")

    def new_pairs(self, pairs: list[tuple[str, str]]) -> list[dict]:
        out = []
        for entity, relation in pairs:
            self.pair_count += 1
            out.append({"pair_id": f"{self.tid}#p{self.pair_count}", "entity": entity, "relation": relation})
        return out


def program_for(
    ctx: Context, q: dict, tid: str, hint: str | None
) -> Generator[list[Call], list[Outcome], dict]:
    """The KnowTrace loop for one question; returns the trajectory's fields (without run metadata)."""
    trajectory = _Trajectory(tid)
    stop_reason, answer, thought = "max_iterations", None, None
    for _iteration in range(ctx.params.agent.max_iterations):
        ex, pairs = yield from _explore(ctx, q, hint, trajectory)
        if ex is None:
            break
        if ex.sufficient:
            answer, thought, stop_reason = ex.answer, ex.thought, "sufficient"
            break
        added = yield from _retrieve_and_ground(ctx, q, pairs, trajectory)
        if trajectory.failure is not None:
            break
        if added == 0:
            stop_reason = "no_new_triplets"
            break
    if trajectory.failure is not None:
        stop_reason = trajectory.failure[0]
    if answer is None:
        final = yield from _final(ctx, q, hint, trajectory)
        if final is not None:
            answer, thought = final.answer, final.thought
    if trajectory.failure is not None:
        status, error = trajectory.failure
    else:
        status, error = ("max_iterations" if stop_reason == "max_iterations" else "ok"), None
    return {
        "status": status,
        "error": error,
        "stop_reason": stop_reason,
        "answer": answer,
        "final_thought": thought,
        "steps": trajectory.steps,
        "triplets": trajectory.triplets,
    }


def _with_hint(build: Callable, ctx: Context, q: dict, graph: list, hint: str | None) -> tuple[list, list]:
    """A prompt as sent (with the hint, when rationalizing) and as recorded (never with it)."""
    sent = build(ctx.version, q["question"], graph, hint)
    return sent, (build(ctx.version, q["question"], graph) if hint is not None else sent)


def _explore(
    ctx: Context, q: dict, hint: str | None, trajectory: _Trajectory
) -> Generator[list[Call], list[Outcome], tuple[Any, list[dict]]]:
    """One explore call: (its parsed reply, the pairs it asks for); (None, []) when the call failed."""
    a, fmt = ctx.params.agent, ctx.fmt
    sent, recorded = _with_hint(prompts.explore_messages, ctx, q, trajectory.graph(), hint)
    (out,) = yield [ctx.call("explore", sent, recorded, lambda text: fmt.parse_explore(text, a.max_pairs))]
    if out.status != "ok":
        trajectory.record("explore", out)
        trajectory.fail(out)
        return None, []
    ex = out.parsed
    if ex.sufficient:
        trajectory.record("explore", out, sufficient=True, thought=ex.thought, answer=ex.answer)
        return ex, []
    pairs = trajectory.new_pairs(ex.pairs)
    trajectory.record("explore", out, sufficient=False, thought=ex.thought, pairs=pairs)
    return ex, pairs


def _retrieve_and_ground(
    ctx: Context, q: dict, pairs: list[dict], trajectory: _Trajectory
) -> Generator[list[Call], list[Outcome], int]:
    """Retrieve passages and ask one complete call per pair, all at once; ground the new triplets and add
    them to G. Returns how many were added."""
    pool = [p["pid"] for p in q.get("passages") or []] if ctx.params.index.scope == "question" else None
    shown = [_retrieve(ctx, q, pair, pool) for pair in pairs]
    calls = []
    for pair, retrieved in zip(pairs, shown):
        msgs = prompts.complete_messages(
            ctx.version,
            q["question"],
            pair["entity"],
            pair["relation"],
            [(p["title"], _passage_text(p)) for p in retrieved],
            ctx.params.agent.passage_chars,
        )
        calls.append(ctx.call("complete", msgs, msgs, ctx.fmt.parse_complete))
    outs = yield calls
    added = 0
    for pair, retrieved, out in zip(pairs, shown, outs):
        new_ids = _add_triplets(ctx, trajectory, pair, retrieved, out.parsed or [])
        added += len(new_ids)
        trajectory.record(
            "complete",
            out,
            pair_id=pair["pair_id"],
            retrieved=[p["pid"] for p in retrieved],
            triplet_ids=new_ids,
            error=_rejected(out.parsed),
        )
        trajectory.fail(out)
    return added


def _retrieve(ctx: Context, q: dict, pair: dict, pool: list[str] | None) -> list[Mapping]:
    """The passages shown to one pair's complete call (``pool``: the question's own passages, when the
    index is searched per question)."""
    query = f"{pair['entity']} {pair['relation']}"
    if ctx.params.retrieval.query_with_question:
        query = f"{query} {q['question']}"
    retrieved = []
    for hit in ctx.retriever.search(query, q["dataset"], ctx.params.retrieval.top_n, pool):
        try:  # not .get: a ChainMap's get looks the pid up twice (`in`, then `[]`)
            retrieved.append(ctx.passages[hit.pid])
        except KeyError:
            raise FactoryError(
                f"question {q['question_id']!r}: retrieved passage {hit.pid!r} is not among the "
                "passages given to the agent"
            ) from None
    return retrieved


def _add_triplets(
    ctx: Context, trajectory: _Trajectory, pair: dict, retrieved: list[Mapping], completed: Any
) -> list[str]:
    """Ground the completed triplets not yet in G against the passages shown and add them; their ids."""
    index, new_ids = len(trajectory.steps), []
    for subject, relation, obj in completed:
        key = (normalize_answer(subject), normalize_answer(relation), normalize_answer(obj))
        if key in trajectory.seen:
            continue
        trajectory.seen.add(key)
        g = ctx.ground(subject, relation, obj, retrieved, ctx.params.agent.grounding_threshold)
        triplet_id = f"{trajectory.tid}#t{len(trajectory.triplets) + 1}"
        trajectory.triplets.append(
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
    return new_ids


def _final(
    ctx: Context, q: dict, hint: str | None, trajectory: _Trajectory
) -> Generator[list[Call], list[Outcome], Any]:
    """The forced final call (no answer was given): its parsed reply, None when the call failed."""
    sent, recorded = _with_hint(prompts.final_messages, ctx, q, trajectory.graph(), hint)
    (out,) = yield [ctx.call("final", sent, recorded, ctx.fmt.parse_final)]
    if out.status != "ok":
        trajectory.record("final", out)
        trajectory.fail(out)
        return None
    trajectory.record("final", out, thought=out.parsed.thought, answer=out.parsed.answer)
    return out.parsed
