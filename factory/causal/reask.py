"""The causal check of backtracing (docs/design.md §4): a trajectory's final answer re-asked on other graphs.

For a correct trajectory with graph G and supporting subgraph S_q (its backtrace labels under one
mode x target mode), the forced-final prompt of the trajectory's own prompt version is asked again
by the policy that generated it, greedy, under each condition:

- ``full``: all of G (does the policy reproduce its answer from G alone? the reference);
- ``without_sq``: G minus S_q (is S_q necessary?);
- ``only_sq``: S_q alone (is it sufficient?);
- ``without_random``: G minus |S_q| triplets drawn uniformly from G, one draw per random seed (the
  control matched in size: removing *some* |S_q| triplets may cost accuracy too);
- ``closed_book``: the empty graph (what the policy answers without evidence). A trajectory whose
  closed-book answer is correct is *parametric*.

Graphs keep G's creation order. Replies are parsed with the agent's final-step parser and repaired
like the loop does (``agent.repair_attempts``); identical prompts within a shard are sent once. The
rows of a round, one ``schemas.COUNTERFACTUAL`` row per trajectory x condition (x random seed), and
its checkpointed shards: ``factory.causal.rows``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from factory.agent import prompts
from factory.agent.fields import ParseError
from factory.execution.sampling import even_quotas
from factory.llm.base import LLM, ChatRequest, ChatResponse, Sampling
from factory.params.vocab import CONDITIONS
from factory.utils.errors import FactoryError
from factory.utils.seeds import stream_random
from factory.utils.splits import unit_hash

RANDOM_CONDITION = "without_random"
CLOSED_BOOK = "closed_book"


@dataclass(frozen=True)
class Shown:
    """The graph one condition shows: its triplet ids in G's order."""

    condition: str
    random_seed: int | None
    triplet_ids: tuple[str, ...]


def random_removal(triplet_ids: Sequence[str], size: int, seed: int, trajectory_id: str) -> set[str]:
    """``size`` triplets of G drawn uniformly, with a stable per-(seed, trajectory) RNG."""
    rng = stream_random("counterfactual-random", seed, trajectory_id)
    return set(rng.sample(list(triplet_ids), min(size, len(triplet_ids))))


def condition_graphs(
    trajectory: Mapping, sq_ids: Iterable[str], conditions: Sequence[str], random_seeds: Sequence[int]
) -> list[Shown]:
    """The graph of every condition (``without_random``: one per random seed), in canonical order."""
    tid = trajectory["trajectory_id"]
    unknown = [c for c in conditions if c not in CONDITIONS]
    if unknown:
        raise FactoryError(f"unknown counterfactual condition(s) {unknown} (known: {', '.join(CONDITIONS)})")
    g = [t["triplet_id"] for t in trajectory.get("triplets") or []]
    sq = set(sq_ids)
    if not sq <= set(g):
        raise FactoryError(
            f"trajectory {tid!r}: labels field 'kept_triplet_ids' names triplets not in its graph: "
            f"{sorted(sq - set(g))[:3]}"
        )
    out: list[Shown] = []
    for c in CONDITIONS:  # canonical order, whatever order params list them in
        if c not in conditions:
            continue
        if c == "full":
            out.append(Shown(c, None, tuple(g)))
        elif c == "without_sq":
            out.append(Shown(c, None, tuple(t for t in g if t not in sq)))
        elif c == "only_sq":
            out.append(Shown(c, None, tuple(t for t in g if t in sq)))
        elif c == RANDOM_CONDITION:
            for s in random_seeds:
                drop = random_removal(g, len(sq), s, tid)
                out.append(Shown(c, int(s), tuple(t for t in g if t not in drop)))
        else:
            out.append(Shown(c, None, ()))
    return out


def rows_per_trajectory(conditions: Sequence[str], random_seeds: int) -> int:
    """Rows (first-attempt LLM calls) per trajectory: the cost of the check."""
    return sum(random_seeds if c == RANDOM_CONDITION else 1 for c in set(conditions))


def select_trajectories(trajectories: Sequence[Mapping], max_n: int, seed: int) -> list[Mapping]:
    """The correct trajectories, or a seeded sample of ``max_n`` even across datasets (in file order)."""
    correct = [t for t in trajectories if t.get("correct")]
    if len(correct) <= max_n:
        return correct
    pool: dict[str, list[Mapping]] = {}
    for t in correct:
        pool.setdefault(t["dataset"], []).append(t)
    quotas = even_quotas({d: len(ts) for d, ts in pool.items()}, max_n)
    chosen: set[str] = set()
    for d, ts in sorted(pool.items()):
        ranked = sorted(
            ts, key=lambda t: (unit_hash("counterfactual", seed, t["trajectory_id"]), t["trajectory_id"])
        )
        chosen.update(t["trajectory_id"] for t in ranked[: quotas[d]])
    return [t for t in correct if t["trajectory_id"] in chosen]


# ---------------------------------------------------------------- re-asking


@dataclass
class Reply:
    """One re-asked prompt after its repairs."""

    status: str  # ok | parse_error | llm_error
    output: str
    answer: str | None
    error: str | None
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class _Pending:
    version: str
    first: list[dict]
    current: list[dict]
    reply: Reply = field(default_factory=lambda: Reply("llm_error", "", None, "not asked"))
    done: bool = False
    replies: list[str] = field(default_factory=list)  # the response cache's keys of its attempts


def sampling_for(version: str, max_new_tokens: int, seed: int) -> Sampling:
    """Greedy decoding with the prompt version's stop strings (as the loop sends them)."""
    stop = prompts.prompt_set(version).stop
    return Sampling(temperature=0.0, top_p=1.0, max_new_tokens=max_new_tokens, seed=seed, stop=stop)


def reask(
    llm: LLM,
    prompts_to_ask: Sequence[tuple[str, list[dict]]],
    *,
    max_new_tokens: int,
    seed: int,
    repair_attempts: int,
    constrained_pairs: int | None = None,
) -> tuple[list[Reply], int]:
    """Ask every (prompt version, messages); repair unparseable replies. Returns replies and calls sent.

    Replies are read with the prompt version's own final-step parser; with ``constrained_pairs`` the
    decoding is constrained to that version's final-step grammar (as the loop's final steps are).
    Identical requests of one round of asking go to the backend once (their replies are shared).
    """
    from factory.agent.loop import step_constraints

    constraints: dict[str, object] = {}

    def request(p: _Pending) -> ChatRequest:
        if constrained_pairs is not None and p.version not in constraints:
            constraints[p.version] = step_constraints(p.version, constrained_pairs)["final"]
        sampling = sampling_for(p.version, max_new_tokens, seed)
        return ChatRequest.of(p.current, sampling, constraint=constraints.get(p.version))

    pending = [_Pending(v, list(m), list(m)) for v, m in prompts_to_ask]
    sent = 0
    while True:
        todo = [p for p in pending if not p.done]
        if not todo:
            break
        distinct: dict[ChatRequest, int] = {}
        for p in todo:
            distinct.setdefault(request(p), 0)
        requests = list(distinct)
        responses = llm.generate(requests)
        if len(responses) != len(requests):
            raise FactoryError(
                f"LLM backend {llm.backend!r} returned {len(responses)} responses for {len(requests)} "
                "requests"
            )
        sent += len(requests)
        by_request = dict(zip(requests, responses))
        for p in todo:
            _settle(
                p,
                by_request[request(p)],
                repair_attempts,
            )
            if p.done and p.reply.status == "parse_error" and hasattr(llm, "mark_unusable"):
                llm.mark_unusable(p.replies, "parse_error")  # a later run asks it again
    return [p.reply for p in pending], sent


def _settle(p: _Pending, response: ChatResponse, repair_attempts: int) -> None:
    """Accept or fail the reply, or prepare its repair (the prompt stays pending)."""
    r = p.reply
    r.attempts += 1
    if response.cache_key is not None:
        p.replies.append(response.cache_key)
    r.prompt_tokens += int(response.prompt_tokens or 0)
    r.completion_tokens += int(response.completion_tokens or 0)
    text = response.text or ""
    r.output = text
    if response.error is not None:
        r.status, r.answer, r.error = "llm_error", None, str(response.error) or "unknown LLM error"
        p.done = True
        return
    try:
        parsed = prompts.output_format(p.version).parse_final(text)
    except ParseError as exc:
        if r.attempts <= repair_attempts:
            p.current = prompts.repair_messages(p.version, p.first, text, str(exc))
            return
        r.status, r.answer, r.error = "parse_error", None, str(exc)
        p.done = True
        return
    r.status, r.answer, r.error = "ok", parsed.answer, None
    p.done = True


def parametric_ids(rows: Iterable[Mapping]) -> set[str]:
    """Trajectories flagged parametric (closed-book answer correct) in counterfactual rows."""
    return {r["trajectory_id"] for r in rows if r.get("parametric")}
