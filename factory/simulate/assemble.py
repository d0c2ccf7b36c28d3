"""A simulated trajectory record assembled from (pair, triplets) iterations: the contract of a real one.

Tests and the simulator build trajectories with known labels through ``build_trajectory``; the
records are marked ``policy='simulated'`` and are never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from factory.agent.format import render_complete, render_explore, render_final
from factory.metrics import exact_match, f1

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
    tid = trajectory_id or f"{policy}/{qid}"
    steps: list[dict] = []
    triplets: list[dict] = []
    tags: dict[str, str] = {}
    seen: set[tuple[str, str, str]] = set()
    n_pair = 0

    def graph_text() -> str:
        return "\n".join(f"({t['subject']} ; {t['relation']} ; {t['object']})" for t in triplets) or "(empty)"

    def add_step(kind: str, user: str, output: str, **extra: Any) -> dict:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        step = {
            "index": len(steps),
            "kind": kind,
            "messages": messages,
            "output": output,
            "status": "ok",
            "error": None,
            "sufficient": extra.get("sufficient"),
            "thought": extra.get("thought"),
            "answer": extra.get("answer"),
            "pairs": extra.get("pairs", []),
            "pair_id": extra.get("pair_id"),
            "retrieved": extra.get("retrieved", []),
            "triplet_ids": extra.get("triplet_ids", []),
            "attempts": 1,
            "prompt_tokens": sum(_words(m["content"]) for m in messages),
            "completion_tokens": _words(output),
            "latency_s": 0.0,
        }
        steps.append(step)
        return step

    for k, pairs in enumerate(iterations):
        thought = (
            thoughts[k] if thoughts and k < len(thoughts) else None
        ) or "I need to look up " + "; ".join(f"the {p.relation} of {p.entity}" for p in pairs) + "."
        ids = [f"{tid}#p{n_pair + j}" for j in range(len(pairs))]
        n_pair += len(pairs)
        explore_pairs = [
            {"pair_id": i, "entity": p.entity, "relation": p.relation} for i, p in zip(ids, pairs)
        ]
        add_step(
            "explore",
            f"Question: {question.get('question', '')}\nKnowledge graph:\n{graph_text()}",
            render_explore(thought, [(p.entity, p.relation) for p in pairs]),
            sufficient=False,
            thought=thought,
            pairs=explore_pairs,
        )
        for pair_id, p in zip(ids, pairs):
            index = len(steps)
            new_ids = []
            for spec in p.triplets:
                s, r, o = spec[0], spec[1], spec[2]
                key = (s, r, o)
                if dedupe and key in seen:
                    continue
                seen.add(key)
                t_id = f"{tid}#t{len(triplets)}"
                triplets.append(
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
                tags[t_id] = spec[3] if len(spec) > 3 else "true"
                new_ids.append(t_id)
            add_step(
                "complete",
                f"Look up: {p.entity} | {p.relation}",
                render_complete([(s[0], s[1], s[2]) for s in p.triplets]),
                pair_id=pair_id,
                retrieved=[p.pid] if p.pid else [],
                triplet_ids=new_ids,
            )
    user = f"Question: {question.get('question', '')}\nKnowledge graph:\n{graph_text()}"
    if final_kind == "final":
        add_step("final", user, render_final(final_thought, answer), thought=final_thought, answer=answer)
    else:
        add_step(
            "explore",
            user,
            render_explore(final_thought, [], sufficient=True, answer=answer),
            sufficient=True,
            thought=final_thought,
            answer=answer,
        )
    answers = list(question.get("answers") or [])
    em = exact_match(answer, answers) if answers else 0.0
    trajectory = {
        "trajectory_id": tid,
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
        "steps": steps,
        "triplets": triplets,
    }
    return trajectory, tags


def build_trajectory(
    question: dict, iterations: list[list[tuple]], final_thought: str, answer: str, **options: Any
) -> dict:


    """Convenience for notebooks and tests: iterations as lists of (entity, relation, [triplets])."""
    its = [[SimPair(e, r, list(ts)) for e, r, ts in it] for it in iterations]
    return assemble_trajectory(question, its, final_thought, answer, **options)[0]


