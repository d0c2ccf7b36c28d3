"""Resumable trajectory generation: what the trajectories and evaluate stages share.

``generate_trajectories`` runs the agent over a question sample, optionally adds STaR
rationalizations for questions whose samples are all wrong, checks that every question x sample
left exactly one record, and returns how each ended (the records are on disk). Two schedules, one result:

- a backend that takes single requests (``acomplete``: the openai backend) runs continuously
  (``factory.execution.scheduler``): ``llm.concurrency`` calls in flight over a window of
  ``trajectories.window`` active trajectories, each record journaled the moment it finishes;
- the local backend runs in checkpointed shards of ``trajectories.shard_size`` questions, each in
  lockstep batches (its bf16 outputs depend on the batch, so batches stay a function of the params).

Under ``execution.engine: ray`` the shards (``execution.shard_size`` questions; the local backend's
``trajectories.shard_size``, so its batches stay the same) run as Ray tasks, each scheduled as
above inside its worker, journaled by the driver as they return (``factory.execution.cluster``).

Every way the final file holds the records in plan order (question, then sample, then its
rationalization), so a resumed run, an uninterrupted one and the other schedule write the same
bytes for the same replies (the response cache replays them).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from factory.agent.loop import Run, constrained_decoding, run_trajectories
from factory.execution.shards import Journal, fingerprint, run_in_shards
from factory.llm.base import LLM, Sampling
from factory.utils import paths
from factory.utils.errors import FactoryError


def plan_fingerprint(
    params: Any,
    llm: LLM,
    policy: Any,
    samples: Sequence[int],
    sampling: Sampling,
    run_id: str,
    rationalize: bool,
) -> str:
    """Everything that decides a shard's content; a checkpoint made under another one is discarded."""
    return fingerprint(
        {
            "params": params.digest("agent", "retrieval", "index", "trajectories"),
            "max_new_tokens": params.llm.max_new_tokens,
            "constrained": constrained_decoding(params, llm),
            "constraint_field": params.llm.constraint_field if llm.backend == "openai" else None,
            "backend": llm.backend,
            "model": llm.identity,
            "policy": getattr(policy, "name", str(policy)),
            "samples": list(samples),
            "sampling": asdict(sampling),
            "run_id": run_id,
            "rationalize": rationalize,
        }
    )


def generate_trajectories(
    params: Any,
    questions: Sequence[dict],
    *,
    llm: LLM,
    retriever: Any,
    passages: Mapping[str, Mapping] | None,
    policy: Any,
    round_: int,
    samples: int,
    sampling: Sampling,
    out_path: str | Path,
    run_id: str,
    rationalize: bool = False,
    desc: str = "trajectories",
    on_shard: Callable[[int], None] | None = None,
) -> list[dict]:
    """Trajectories of ``questions`` x ``samples`` (+ rationalizations) written to ``out_path``; the
    ``outcome`` of each record, in the file's order (the records themselves are only on disk:
    ``factory.execution.summary.summarize_file`` reads them back a row group at a time).
    ``on_shard(k)`` runs after shard k is on disk (sharded schedules only; tests use it).

    Under ``execution.engine: ray`` the shards run as Ray tasks, each building its own index and
    backend (``llm`` is then used for its identity alone) and sharing the response cache through
    the engine; the cache's hits and misses on the cluster are added to ``llm``'s counts."""
    from factory.execution.engine import count_cluster_cache, make_engine

    fp = plan_fingerprint(params, llm, policy, list(range(samples)), sampling, run_id, rationalize)
    with make_engine(params) as engine:
        work = GenerationShards(params, policy, round_, samples, sampling, run_id, rationalize)
        if engine.remote:
            work.cache = engine.response_cache()
            shard_size = (
                params.trajectories.shard_size if llm.backend == "local" else params.execution.shard_size
            )
        elif hasattr(llm, "acomplete"):
            records = _generate_continuously(
                params, questions, llm, retriever, passages, work, out_path, desc, fp
            )
            check_complete(records, questions, samples)
            return records
        else:
            work.llm, work.retriever, work.passages = llm, retriever, passages
            shard_size = params.trajectories.shard_size
        run_in_shards(
            list(questions),
            lambda q: q["question_id"],
            shard_size,
            out_path,
            fp,
            work,
            desc=desc,
            ticks_per_unit=work.ticks_per_question,
            on_shard=on_shard,
            engine=engine,
        )
        count_cluster_cache(engine, llm)
    from schemas import iter_rows

    outcomes = list(iter_rows(out_path, list(OUTCOME_FIELDS)))
    check_complete(outcomes, questions, samples)
    return outcomes


@dataclass
class GenerationShards:
    """The work of a generation's shards: ``work(shard, tick)`` -> the shard's records in plan order
    (question, then sample, then its rationalization).

    In this process it runs on the driver's ``llm``, ``retriever`` and ``passages``. Sent to a Ray
    worker it travels as params and plain data (the backend and the index never travel) and builds
    them there once per worker process, its backend cached through ``cache`` (the engine's).
    """

    params: Any
    policy: Any
    round_: int
    samples: int
    sampling: Sampling
    run_id: str
    rationalize: bool
    cache: Any = None
    llm: Any = field(default=None, repr=False)
    retriever: Any = field(default=None, repr=False)
    passages: Any = field(default=None, repr=False)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "llm": None, "retriever": None, "passages": None}

    def _resources(self) -> tuple[Any, Any, Any]:
        if self.llm is not None:
            return self.llm, self.retriever, self.passages
        from factory.agent.setup import make_policy_llm
        from factory.execution.engine import worker_resource
        from factory.retrieval import load_retriever

        index = Path(paths.INDEX_DIR).resolve()  # a worker may serve several projects and index builds
        key = (
            "generation",
            fingerprint(self.params.model_dump(mode="json")),
            self.policy,
            repr(self.cache),
            str(index),
            index.stat().st_mtime_ns if index.exists() else None,
        )
        llm, retriever = worker_resource(
            key,
            lambda: (
                make_policy_llm(self.params, self.policy, cache=self.cache),
                load_retriever(paths.INDEX_DIR, self.params),
            ),
        )
        return llm, retriever, retriever.store

    def __call__(self, shard: list[dict], tick: Callable[[int], None]) -> list[dict]:
        llm, retriever, passages = self._resources()
        try:
            if hasattr(llm, "acomplete"):
                return self._continuously(shard, llm, retriever, passages, tick)
            return self._in_lockstep(shard, llm, retriever, passages, tick)
        finally:
            if self.cache is not None:
                self.cache.flush()  # the shard's replies are stored before its records count as done

    def run(self, questions: Sequence[dict], llm: Any, retriever: Any, passages: Any) -> Run:
        return Run(
            questions,
            llm,
            retriever,
            self.params,
            self.policy,
            self.round_,
            self.sampling,
            passages=passages,
            run_id=self.run_id,
        )

    @property
    def ticks_per_question(self) -> int:
        """Progress units of a question: its samples, and its hint run's slot when rationalizing
        (ticked when the hint run ends, or at once when a correct sample makes it unneeded)."""
        return self.samples + int(self.rationalize)

    def ticks_done(self, done: Mapping, question: dict) -> int:
        """The progress ticks ``question`` has earned in ``done`` (a resumed run starts from them)."""
        qid = question["question_id"]
        samples = sum((qid, s, False) in done for s in range(self.samples))
        slot = self.rationalize and samples == self.samples and not self.rationalization(done, question)
        return samples + int(slot)

    def after(
        self, done: Mapping, question: dict, rationalized: bool, tick: Callable[[int], None]
    ) -> list[tuple[dict, int, bool]]:
        """A record of ``question`` is now in ``done``: tick its progress; the hint run it makes due."""
        tick(1)
        if rationalized or not self.rationalize:
            return []
        due = self.rationalization(done, question)
        qid = question["question_id"]
        if not due and all((qid, s, False) in done for s in range(self.samples)):
            tick(1)  # a correct sample: no hint run will come
        return due

    def rationalization(self, done: Mapping, question: dict) -> list[tuple[dict, int, bool]]:
        """The hint run of ``question`` once all its samples are in ``done`` and wrong (and it has none)."""
        qid = question["question_id"]
        if not self.rationalize or (qid, self.samples, True) in done:
            return []
        mine = [done.get((qid, s, False)) for s in range(self.samples)]
        if any(r is None for r in mine) or any(r["correct"] for r in mine):
            return []
        return [(question, self.samples, True)]

    def _continuously(self, shard, llm, retriever, passages, tick) -> list[dict]:
        from factory.execution.scheduler import run_continuously

        by_id = {q["question_id"]: q for q in shard}
        done: dict[tuple[str, int, bool], dict] = {}

        def on_done(record: dict) -> list[tuple[dict, int, bool]]:
            key = record_key(record)
            done[key] = record
            return self.after(done, by_id[key[0]], key[2], tick)

        todo = [(q, s, False) for q in shard for s in range(self.samples)]
        window = self.params.trajectories.window or 8 * self.params.llm.concurrency
        run_continuously(self.run(shard, llm, retriever, passages), todo, window, on_done)
        return [done[key] for key in plan_keys(shard, self.samples) if key in done]

    def _in_lockstep(self, shard, llm, retriever, passages, tick) -> list[dict]:
        # a long lockstep batch moves the bar by its trajectories' steps (Progress.work)
        in_flight = getattr(tick, "work", None)

        def batch(questions: list[dict], sample_ids: list[int], rationalized: bool) -> list[dict]:
            return run_trajectories(
                self.run(questions, llm, retriever, passages),
                questions,
                sample_ids,
                on_done=lambda _record: tick(1),
                on_progress=in_flight,
                rationalized=rationalized,
            )

        records = batch(shard, list(range(self.samples)), False)
        if self.rationalize:
            done = {record_key(r): r for r in records}
            wrong = [q for q in shard if self.rationalization(done, q)]
            tick(len(shard) - len(wrong))  # questions with a correct sample need no hint run
            if wrong:
                records += batch(wrong, [self.samples], True)
        by_key = {record_key(r): r for r in records}
        return [by_key[key] for key in plan_keys(shard, self.samples) if key in by_key]


def plan_keys(questions: Sequence[dict], samples: int) -> list[tuple[str, int, bool]]:
    """Every record's place in the plan, in plan order: question, then sample, then rationalization."""
    return [
        key
        for q in questions
        for key in [(q["question_id"], s, False) for s in range(samples)]
        + [(q["question_id"], samples, True)]
    ]


def _generate_continuously(
    params: Any,
    questions: Sequence[dict],
    llm: LLM,
    retriever: Any,
    passages: Mapping[str, Mapping] | None,
    work: GenerationShards,
    out_path: str | Path,
    desc: str,
    plan_fp: str,
) -> list[dict]:
    """The continuous schedule over the whole plan (one window across all questions) with a journal;
    the final file in plan order."""
    from factory.execution.scheduler import run_continuously
    from factory.utils.io import progress

    samples = work.samples
    journal = Journal(out_path, plan_fp, [q["question_id"] for q in questions], key=record_key, keep=outcome)
    try:
        done: dict[tuple[str, int, bool], dict] = dict(journal.kept)
        by_id = {q["question_id"]: q for q in questions}
        todo = [
            (q, s, False)
            for q in questions
            for s in range(samples)
            if (q["question_id"], s, False) not in done
        ]
        todo = [u for q in questions for u in work.rationalization(done, q)] + todo
        window = params.trajectories.window or 8 * params.llm.concurrency
        initial = sum(work.ticks_done(done, q) for q in questions)
        # a record is journaled once its replies are committed to the response cache (a re-run of a
        # killed run is then answered from the cache for every record the journal holds)
        cache = getattr(llm, "cache", None)
        after_replies = getattr(cache, "then", None) or (lambda action: action())
        total = len(questions) * work.ticks_per_question
        with progress(total=total, desc=desc, unit="traj", initial=initial) as bar:

            def on_done(record: dict) -> list[tuple[dict, int, bool]]:
                key = record_key(record)
                after_replies(functools.partial(journal.append, record))
                done[key] = outcome(record)
                return work.after(done, by_id[key[0]], key[2], bar)

            try:
                run_continuously(work.run(questions, llm, retriever, passages), todo, window, on_done)
            finally:
                if cache is not None:
                    cache.flush()  # every journal line written (or its error raised) before going on
        ordered = [key for key in plan_keys(questions, samples) if key in done]
        journal.finish(ordered)
        return [done[key] for key in ordered]
    finally:
        journal.close()


def record_key(record: Mapping) -> tuple[str, int, bool]:
    """A trajectory's place in the plan: (question, sample, rationalized)."""
    return record["question_id"], int(record["sample"]), bool(record["rationalized"])


OUTCOME_FIELDS = ("trajectory_id", "question_id", "sample", "rationalized", "status", "correct", "em", "f1")


def outcome(record: Mapping) -> dict:
    """What the drivers keep of a finished trajectory (its record is on disk): who it is and how it
    ended; ``generate_trajectories`` returns these, in plan order."""
    return {name: record[name] for name in OUTCOME_FIELDS}


def check_complete(records: Sequence[Mapping], questions: Sequence[Mapping], samples: int) -> None:
    """Exactly one ordinary record per question x sample (and at most one rationalization per question)."""
    seen: dict[tuple[str, int, bool], int] = {}
    for r in records:
        key = (r["question_id"], int(r["sample"]), bool(r["rationalized"]))
        seen[key] = seen.get(key, 0) + 1
    problems = []
    for q in questions:
        for s in range(samples):
            n = seen.pop((q["question_id"], s, False), 0)
            if n != 1:
                problems.append(f"{q['question_id']} sample {s}: {n} records")
        if seen.pop((q["question_id"], samples, True), 0) > 1:
            problems.append(f"{q['question_id']}: more than one rationalization")
    problems += [
        f"{qid} sample {s}{' (rationalized)' if rat else ''}: unexpected record"
        for (qid, s, rat) in sorted(seen)
    ]
    if problems:
        raise FactoryError(
            "trajectory records do not add up to one per question x sample: " + "; ".join(problems[:10])
        )
