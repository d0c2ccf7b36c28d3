"""A simulated trajectory record assembled from (pair, triplets) iterations: the contract of a real one.

Tests and the simulator build trajectories with known labels through ``build_trajectory``; the
records are marked ``policy='simulated'`` and are never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from factory.agent.format import render_complete, render_explore, render_final
from factory.agent.step_record import Outcome, step_record
from factory.utils.metrics import exact_match, f1

POLICY = "simulated"
PROMPT_VERSION = "simulated-v1"

SYSTEM = (
    "Simulated KnowTrace trajectory (policy 'simulated'): a test instrument for backtracing, never "
    "training data."
)


@dataclass
class SimPair:
    """An entity-relation pair the simulated agent looks up and the triplets its completion returns;
    each triplet is (subject, relation, object) or (subject, relation, object, tag)."""

    entity: str
    relation: str
    triplets: list[tuple] = field(default_factory=list)
    pid: str | None = None  # the passage shown to the completion (retrieved)


def _words(text: str) -> int:
    return len(text.split())


def _thought(thoughts: list[str] | None, k: int, pairs: list[SimPair]) -> str:
    """Iteration k's explore thought: the given one, else one naming the pairs looked up."""
    given = thoughts[k] if thoughts and k < len(thoughts) else None
    return given or "I need to look up " + "; ".join(f"the {p.relation} of {p.entity}" for p in pairs) + "."


@dataclass
class _Assembly:
    """The steps, the graph G and the triplets' tags of one simulated trajectory, as they are added."""

    tid: str
    dedupe: bool
    steps: list[dict] = field(default_factory=list)
    triplets: list[dict] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    seen: set[tuple[str, str, str]] = field(default_factory=set)
    pairs_asked: int = 0

    def graph_text(self) -> str:
        lines = (f"({t['subject']} ; {t['relation']} ; {t['object']})" for t in self.triplets)
        return "\n".join(lines) or "(empty)"

    def add_step(self, kind: str, user: str, output: str, **extra: Any) -> None:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        outcome = Outcome(
            status="ok",
            parsed=None,
            output=output,
            error=None,
            messages=messages,
            attempts=1,
            prompt_tokens=sum(_words(m["content"]) for m in messages),
            completion_tokens=_words(output),
            latency_s=0.0,
        )
        self.steps.append(step_record(len(self.steps), kind, outcome, **extra))

    def explore(self, question: dict, pairs: list[SimPair], thought: str) -> list[str]:
        """An explore step asking for ``pairs``; their pair ids."""
        ids = [f"{self.tid}#p{self.pairs_asked + j}" for j in range(len(pairs))]
        self.pairs_asked += len(pairs)
        self.add_step(
            "explore",
            f"Question: {question.get('question', '')}\nKnowledge graph:\n{self.graph_text()}",
            render_explore(thought, [(p.entity, p.relation) for p in pairs]),
            sufficient=False,
            thought=thought,
            pairs=[{"pair_id": i, "entity": p.entity, "relation": p.relation} for i, p in zip(ids, pairs)],
        )
        return ids

    def complete(self, pair_id: str, p: SimPair) -> None:
        """The complete step of one pair: its triplets join G (once each, with ``dedupe``)."""
        index, new_ids = len(self.steps), []
        for spec in p.triplets:
            s, r, o = spec[0], spec[1], spec[2]
            if self.dedupe and (s, r, o) in self.seen:
                continue
            self.seen.add((s, r, o))
            t_id = f"{self.tid}#t{len(self.triplets)}"
            self.triplets.append(
                {
                    "triplet_id": t_id,
                    "step_index": index,
                    "pair_id": pair_id,
                    "subject": s,
                    "relation": r,
                    "object": o,
                    "source_pid": spec[4] if len(spec) > 4 else p.pid,
                    "source_sentence": None,
                    "grounding_score": None,
                }
            )
            self.tags[t_id] = spec[3] if len(spec) > 3 else "true"
            new_ids.append(t_id)
        self.add_step(
            "complete",
            f"Look up: {p.entity} | {p.relation}",
            render_complete([(s[0], s[1], s[2]) for s in p.triplets]),
            pair_id=pair_id,
            retrieved=[p.pid] if p.pid else [],
            triplet_ids=new_ids,
        )

    def answer(self, question: dict, final_kind: str, thought: str, answer: str) -> None:
        """The answering step: a forced final (``final_kind='final'``) or a sufficient explore."""
        user = f"Question: {question.get('question', '')}\nKnowledge graph:\n{self.graph_text()}"
        if final_kind == "final":
            self.add_step("final", user, render_final(thought, answer), thought=thought, answer=answer)
        else:
            self.add_step(
                "explore",
                user,
                render_explore(thought, [], sufficient=True, answer=answer),
                sufficient=True,
                thought=thought,
                answer=answer,
            )


def assemble_trajectory(
    question: dict,
    iterations: list[list[SimPair]],
    final_thought: str,
    answer: str,
    *,
    trajectory_id: str | None = None,
    thoughts: list[str] | None = None,
    final_kind: str = "explore",
    policy: str = POLICY,
    seed: int = 0,
    dedupe: bool = True,
) -> tuple[dict, dict[str, str]]:
    """A ``schemas.TRAJECTORY`` record from explore iterations; returns (trajectory, tag of each
    triplet id). Token counts are whitespace tokens of the outputs/prompts. ``dedupe`` drops a
    triplet equal to one already in G (as the agent does)."""
    qid = question.get("question_id", "q")
    asm = _Assembly(trajectory_id or f"{policy}/{qid}", dedupe)
    for k, pairs in enumerate(iterations):
        ids = asm.explore(question, pairs, _thought(thoughts, k, pairs))
        for pair_id, p in zip(ids, pairs):
            asm.complete(pair_id, p)
    asm.answer(question, final_kind, final_thought, answer)
    return _record(question, qid, asm, final_thought, answer, policy, seed), asm.tags


def _record(
    question: dict, qid: str, asm: _Assembly, final_thought: str, answer: str, policy: str, seed: int
) -> dict:
    """The trajectory record around the assembled steps and G, scored against the gold answers."""
    answers = list(question.get("answers") or [])
    em = exact_match(answer, answers) if answers else 0.0
    return {
        "trajectory_id": asm.tid,
        "question_id": qid,
        "dataset": question.get("dataset", ""),
        "split": question.get("split", "train"),
        "qtype": question.get("qtype", ""),
        "route": question.get("route", "chain"),
        "policy": policy,
        "round": 0,
        "sample": 0,
        "seed": seed,
        "question": question.get("question", ""),
        "answers": answers,
        "prompt_version": PROMPT_VERSION,
        "model": policy,
        "status": "ok",
        "error": None,
        "answer": answer,
        "final_thought": final_thought,
        "em": em,
        "f1": f1(answer, answers) if answers else 0.0,
        "correct": em == 1.0,
        "rationalized": False,
        "steps": asm.steps,
        "triplets": asm.triplets,
    }


def build_trajectory(
    question: dict, iterations: list[list[tuple]], final_thought: str, answer: str, **options: Any
) -> dict:
    """Convenience for notebooks and tests: iterations as lists of (entity, relation, [triplets])."""
    its = [[SimPair(e, r, list(ts)) for e, r, ts in it] for it in iterations]
    return assemble_trajectory(question, its, final_thought, answer, **options)[0]
