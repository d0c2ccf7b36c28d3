"""The rows of a counterfactual round (``schemas.COUNTERFACTUAL``): the plan that decides them, one
trajectory's rows from its replies, and the round re-asked in checkpointed shards
(``factory.execution.shards``) on the execution engine. What each condition shows and how a prompt
is re-asked and repaired: ``factory.causal.reask``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from factory.agent import prompts
from factory.agent.policy import Policy
from factory.causal import reask as reasking
from factory.causal.reask import CLOSED_BOOK, Reply, Shown, condition_graphs
from factory.execution.shards import fingerprint, run_in_shards
from factory.llm.base import LLM
from factory.params.config import Params
from factory.utils.errors import FactoryError
from factory.utils.metrics import exact_match, f1
from schemas import read_rows

if TYPE_CHECKING:
    from factory.execution.cluster import RemoteCache


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


@dataclass(frozen=True)
class CounterfactualPlan:
    """The counterfactual of one round, decided once from params and the round
    (``factory.causal.round.round_plan``): which trajectories are re-asked, by which policy, under
    which rows plan, in shards of which size."""

    head: Mapping[str, object]  # the first keys of the round's metrics (``factory.causal.round.plan_head``)
    rows: Plan
    chosen: tuple[str, ...]  # the re-asked trajectories' ids, in file order
    correct: int  # the round's correct trajectories (``chosen``: all of them, or a sample)
    shard_size: int
    policy: Policy  # the policy that generated the round; a Ray worker builds its backend from params
    params: Params = field(repr=False)


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
    plan: CounterfactualPlan,
    *,
    llm: LLM,
    out_path: Path,
    desc: str = "counterfactual",
    on_shard: Callable[[int], None] | None = None,
) -> RoundResult:
    """Re-ask the plan's chosen trajectories under every condition; rows written to ``out_path``.

    ``trajectories``: the chosen ones at least (others are ignored); ``sq_by_tid``: S_q (kept triplet
    ids) of every chosen trajectory; a missing one is an error. ``llm`` serves the plan's policy in
    this process; under Ray (``params.execution``) each worker builds the policy's backend itself.
    """
    selected = _chosen(trajectories, sq_by_tid, plan)
    plan_fp = fingerprint(
        {
            "plan": plan.rows.__dict__,
            "backend": llm.backend,
            "model": llm.identity,
            "inputs": _inputs_digest(selected, sq_by_tid),
        }
    )
    from factory.execution.engine import count_cluster_cache, make_engine

    counts = {"sent": 0}
    with make_engine(plan.params) as engine:
        work = ReaskShards(plan, dict(sq_by_tid))
        if engine.remote:
            work.cache = engine.response_cache()
        else:
            work.llm = llm
        run_in_shards(
            selected,
            lambda t: t["trajectory_id"],
            plan.shard_size,
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
    return RoundResult(read_rows(out_path), len(selected), plan.correct, counts["sent"])


def _chosen(
    trajectories: Sequence[Mapping], sq_by_tid: Mapping[str, Sequence[str]], plan: CounterfactualPlan
) -> list[Mapping]:
    """The plan's chosen trajectories, in its order; an error when one or its S_q is missing."""
    by_tid = {t["trajectory_id"]: t for t in trajectories}
    absent = [tid for tid in plan.chosen if tid not in by_tid]
    if absent:
        raise FactoryError(
            f"trajectory {absent[0]!r} is planned for re-asking but not among the trajectories given "
            f"({len(absent)} such): read the rows of the plan's chosen ids"
        )
    missing = [tid for tid in plan.chosen if tid not in sq_by_tid]
    if missing:
        raise FactoryError(
            f"trajectory {missing[0]!r} is correct but has no backtrace labels for {plan.rows.mode} x "
            f"{plan.rows.target_mode} ({len(missing)} such): run `factory backtrace` for this round"
        )
    return [by_tid[tid] for tid in plan.chosen]


@dataclass
class ReaskShards:
    """The re-asks of a shard of trajectories: ``work(shard, tick)`` -> (its rows, {"sent": calls}).
    In this process it asks the driver's ``llm``; on a Ray worker it builds the plan's policy's
    backend there (once per worker), cached through ``cache``."""

    plan: CounterfactualPlan
    sq_by_tid: dict[str, Sequence[str]]
    cache: RemoteCache | None = None
    llm: LLM | None = field(default=None, repr=False)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "llm": None}

    def _llm(self) -> LLM:
        if self.llm is not None:
            return self.llm
        from factory.agent.setup import make_policy_llm
        from factory.execution.engine import worker_resource

        params, policy = self.plan.params, self.plan.policy
        key = ("reask", params.model_dump_json(), policy, repr(self.cache))
        return worker_resource(key, lambda: make_policy_llm(params, policy, cache=self.cache))

    def __call__(self, shard: list[dict], tick: Callable[[int], None]) -> tuple[list[dict], dict]:
        plan, llm = self.plan.rows, self._llm()
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
            # looked up on its module, where a test stands in for it (a run killed mid-shard)
            replies, n = reasking.reask(
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
