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
like the loop does (``agent.repair_attempts``); identical prompts within a shard are sent once. Work
runs in checkpointed shards of trajectories (``factory.execution.shards``): a killed run resumes, and the
final file has the same bytes as an uninterrupted run. One ``schemas.COUNTERFACTUAL`` row per
trajectory x condition (x random seed).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from factory.agent import prompts
from factory.agent.format import ParseError
from factory.execution.sampling import even_quotas
from factory.execution.shards import fingerprint, run_in_shards
from factory.llm.base import LLM, ChatRequest, ChatResponse, Sampling
from factory.params.vocab import CONDITIONS
from factory.utils.errors import FactoryError
from factory.utils.metrics import exact_match, f1
from factory.utils.splits import unit_hash
from schemas import read_rows

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
    digest = hashlib.blake2b(f"counterfactual-random:{seed}:{trajectory_id}".encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
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


# ---------------------------------------------------------------- rows of a round


@dataclass(frozen=True)
class Plan:
    """Everything that decides the rows of a round (besides the trajectories and their labels)."""

    variant: str
    round: int
    protocol_seed: int
    policy: str
    mode: str
    target_mode: str
    conditions: tuple[str, ...]
    random_seeds: tuple[int, ...]
    max_new_tokens: int
    repair_attempts: int
    sampling_seed: int
    # decoding constrained to the final step's grammar with this many pairs allowed, as the loop
    # constrains the policy's own final steps (``factory.agent.loop.constrained_decoding``); None: free
    constrained_pairs: int | None = None


def record_id(trajectory_id: str, condition: str, random_seed: int | None) -> str:
    return f"{trajectory_id}/{condition}" + (f"/seed_{random_seed}" if random_seed is not None else "")


def trajectory_rows(
    trajectory: Mapping,
    sq_ids: Sequence[str],
    shown: Sequence[Shown],
    replies: Sequence[Reply],
    plan: Plan,
    model: str,
) -> list[dict]:
    """The rows of one trajectory (``schemas.COUNTERFACTUAL``), with its parametric flag."""
    answers = list(trajectory["answers"])
    rows = []
    for s, r in zip(shown, replies):
        em = exact_match(r.answer, answers) if r.answer is not None else 0.0
        rows.append(
            {
                "record_id": record_id(trajectory["trajectory_id"], s.condition, s.random_seed),
                "trajectory_id": trajectory["trajectory_id"],
                "question_id": trajectory["question_id"],
                "dataset": trajectory["dataset"],
                "qtype": trajectory["qtype"],
                "route": trajectory["route"],
                "variant": plan.variant,
                "round": plan.round,
                "protocol_seed": plan.protocol_seed,
                "policy": plan.policy,
                "model": model,
                "prompt_version": trajectory["prompt_version"],
                "mode": plan.mode,
                "target_mode": plan.target_mode,
                "condition": s.condition,
                "random_seed": s.random_seed,
                "graph_size": len(trajectory.get("triplets") or []),
                "sq_size": len(sq_ids),
                "shown_triplet_ids": list(s.triplet_ids),
                "output": r.output,
                "status": r.status,
                "error": r.error,
                "answer": r.answer,
                "em": em,
                "f1": f1(r.answer, answers) if r.answer is not None else 0.0,
                "correct": em == 1.0,
                "parametric": None,
                "attempts": r.attempts,
                "prompt_tokens": r.prompt_tokens,
                "completion_tokens": r.completion_tokens,
            }
        )
    closed = [row for row in rows if row["condition"] == CLOSED_BOOK and row["status"] != "llm_error"]
    parametric = closed[0]["correct"] if closed else None
    for row in rows:
        row["parametric"] = parametric
    return rows


@dataclass
class RoundResult:
    rows: list[dict]
    selected: int  # trajectories re-asked
    correct: int  # correct trajectories of the round
    calls_sent: int  # requests this process sent to the backend (repairs included; a resumed run: the rest)


def _inputs_digest(selected: Sequence[Mapping], sq: Mapping[str, Sequence[str]]) -> str:
    """What the trajectories contribute to the rows: a checkpoint of other inputs is discarded."""
    return fingerprint(
        [
            [
                t["trajectory_id"],
                t["prompt_version"],
                t["question"],
                list(t["answers"]),
                [
                    [x["triplet_id"], x["subject"], x["relation"], x["object"]]
                    for x in t.get("triplets") or []
                ],
                list(sq[t["trajectory_id"]]),
            ]
            for t in selected
        ]
    )


def counterfactual_round(
    trajectories: Sequence[Mapping],
    sq_by_tid: Mapping[str, Sequence[str]],
    *,
    llm: LLM,
    plan: Plan,
    max_trajectories: int,
    sample_seed: int,
    shard_size: int,
    out_path,
    desc: str = "counterfactual",
    on_shard: Callable[[int], None] | None = None,
    correct: int | None = None,
    params: Any = None,
    policy: Any = None,
) -> RoundResult:
    """Re-ask the selected correct trajectories under every condition; rows written to ``out_path``.

    ``sq_by_tid``: S_q (kept triplet ids) of every correct trajectory; a missing one is an error.
    ``trajectories`` may be the selection already (``select_trajectories`` of the round's ids, the
    stage reads only those); ``correct`` is then the round's number of correct trajectories.
    With ``params`` (and the ``policy`` that ``llm`` serves) the shards run on
    ``execution.engine``: under Ray each worker builds the policy's backend itself.
    """
    selected = select_trajectories(trajectories, max_trajectories, sample_seed)
    missing = [t["trajectory_id"] for t in selected if t["trajectory_id"] not in sq_by_tid]
    if missing:
        raise FactoryError(
            f"trajectory {missing[0]!r} is correct but has no backtrace labels for {plan.mode} x "
            f"{plan.target_mode} ({len(missing)} such): run `factory backtrace` for this round"
        )
    plan_fp = fingerprint(
        {
            "plan": plan.__dict__,
            "backend": llm.backend,
            "model": llm.identity,
            "inputs": _inputs_digest(selected, sq_by_tid),
        }
    )
    from factory.execution.engine import count_cluster_cache, make_engine

    counts = {"sent": 0}
    with make_engine(params) as engine:
        work = ReaskShards(plan, dict(sq_by_tid), params, policy)
        if engine.remote:
            work.cache = engine.response_cache()
        else:
            work.llm = llm
        run_in_shards(
            list(selected),
            lambda t: t["trajectory_id"],
            shard_size,
            out_path,
            plan_fp,
            work,
            artifact="counterfactual",
            desc=desc,
            on_shard=on_shard,
            engine=engine,
            counts=counts,
        )
        count_cluster_cache(engine, llm)
    if correct is None:
        correct = sum(1 for t in trajectories if t.get("correct"))
    return RoundResult(read_rows(out_path), len(selected), correct, counts["sent"])


@dataclass
class ReaskShards:
    """The re-asks of a shard of trajectories: ``work(shard, tick)`` -> (its rows, {"sent": calls}).
    In this process it asks the driver's ``llm``; on a Ray worker it builds the policy's backend
    there (once per worker), cached through ``cache``."""

    plan: Plan
    sq_by_tid: dict[str, Sequence[str]]
    params: Any = None
    policy: Any = None
    cache: Any = None
    llm: Any = field(default=None, repr=False)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "llm": None}

    def _llm(self) -> LLM:
        if self.llm is not None:
            return self.llm
        from factory.agent.setup import make_policy_llm
        from factory.execution.engine import worker_resource

        key = ("reask", self.params.model_dump_json(), self.policy, repr(self.cache))
        return worker_resource(key, lambda: make_policy_llm(self.params, self.policy, cache=self.cache))

    def __call__(self, shard: list[dict], tick: Callable[[int], None]) -> tuple[list[dict], dict]:
        plan, llm = self.plan, self._llm()
        shown_of, asks = [], []
        for t in shard:
            shown = condition_graphs(
                t, self.sq_by_tid[t["trajectory_id"]], plan.conditions, list(plan.random_seeds)
            )
            by_id = {x["triplet_id"]: (x["subject"], x["relation"], x["object"]) for x in t["triplets"]}
            shown_of.append(shown)
            asks += [
                (
                    t["prompt_version"],
                    prompts.final_messages(
                        t["prompt_version"], t["question"], [by_id[i] for i in s.triplet_ids]
                    ),
                )
                for s in shown
            ]
        try:
            replies, n = reask(
                llm,
                asks,
                max_new_tokens=plan.max_new_tokens,
                seed=plan.sampling_seed,
                repair_attempts=plan.repair_attempts,
                constrained_pairs=plan.constrained_pairs,
            )
        finally:
            if self.cache is not None:
                self.cache.flush()
        tick(len(shard))  # the bar counts trajectories; its label carries the calls (the stage's desc)
        rows, k = [], 0
        for t, shown in zip(shard, shown_of):
            rows += trajectory_rows(
                t,
                self.sq_by_tid[t["trajectory_id"]],
                shown,
                replies[k : k + len(shown)],
                plan,
                str(llm.identity),
            )
            k += len(shown)
        return rows, {"sent": n}


def parametric_ids(rows: Iterable[Mapping]) -> set[str]:
    """Trajectories flagged parametric (closed-book answer correct) in counterfactual rows."""
    return {r["trajectory_id"] for r in rows if r.get("parametric")}
