"""Knowledge backtracing (docs/design.md §2): which generations of a trajectory contributed to its answer.

Pure functions over a trajectory record (``schemas.TRAJECTORY`` as ``read_rows`` gives it), all
importable from ``factory.backtrace`` (the graph and path search live in ``factory.backtrace.graph``,
the entity choices in ``factory.backtrace.targets``, entity linking in ``factory.backtrace.linking``):

- ``build_graph``: the DTKG rule filter drops triplets whose relation contains an administrative
  keyword as a word (``id``, ``source``, ``url`` ...); the rest form the graph G whose nodes are
  normalised entity names with linked variants merged (``factory.backtrace.linking``) and containment
  links between names that contain each other but stay apart (paths may cross them; never labelled).
- ``initial_entities``: nodes linked from the entities of the FIRST explore step's pairs (fallback, e.g.
  for graphs without explore steps: the question's entities, ``factory.backtrace.question``).
- ``target_entities``: per target mode (below).
- ``supporting_subgraph``: the triplets S_q on paths between I and T, per mode:
  ``undirected_shortest`` (default) — union of all shortest paths between every (i, t) on the
  undirected multigraph view, computed exactly from BFS distances (an edge u-v lies on a shortest
  i-t path iff d(i,u) + 1 + d(v,t) == d(i,t); tested against networkx); ``directed_reach`` — s->o kept iff s
  is reachable
  from I (or in I) and some t in T is reachable from o (or o in T); ``undirected_simple`` — all
  simple paths of at most ``params.simple_cutoff`` triplets (networkx ``all_simple_paths``; ``None`` = no
  cutoff, the naive baseline).
- ``backtrace``: the labels row (``schemas.LABELS``) for ``params.mode`` x ``params.target_mode``;
  ``backtrace_modes``: the rows of ``params.modes`` x ``params.target_modes`` (``params``: the
  ``backtrace`` section of the params, ``factory.params.label_sections.BacktraceParams``).

Rules this module chooses (and tests):

- Parallel triplets (duplicates, or two relations between the same two nodes) are alternative edges
  of the multigraph: all of them are on a path when one is.
- A self-loop (subject and object are the same node after linking) lies on no path, in every mode. When
  its two names differ as written ("(The Jewel of the Nile ; characters search for ; Jewel of the
  Nile)": one entity, names differing by an article) it rides with its node: it is kept whenever the
  node is on S_q's paths or is an initial entity that is itself a target, so the triplet is never lost.
- i == t: when an initial entity is itself a target, the zero-length path contains no triplet, so
  that pair contributes nothing; triplets touching it count only if they lie on a path between
  *another* (i, t) pair (or, in ``directed_reach``, on a walk I -> ... -> T of length >= 1).
- Target modes: ``thought_and_answer`` (paper) = nodes named in the final thought and in the answer
  (``answer_nodes``: the node of the answer's own name when there is one; else the nodes named in it
  plus the nodes containing it as whole words, for a specific or numeric answer; else the answer
  linked like a mention). An answer that names no node at all targets the passage that states it
  when the caller gives the passages (``factory.backtrace.answer_passage``).
  ``answer_only`` = the answer's nodes alone; ``gold_answer`` (oracle) = the gold answers' nodes
  (``gold_answers`` argument, else the trajectory's ``answers``); ``question_only`` = nodes named in
  the question (a no-answer control: for chain questions it usually finds nothing beyond I).
- Yes/no and comparison answers (the rule docs/design.md §2 asks for): the *compared entities* C are the
  question's entities that the agent looked up (``targets.compared_entities``; not a distractor it
  looked up beside them, not a value the question names: "Spain" in "Are A and B both in Spain?").
  When the answer is yes/no, or all its nodes are compared entities ("Which film is newer, A or B?"
  -> "B"), the answer names no evidence; the targets then include the compared entities' values
  (``targets.compared_chains``): the facts the agent's lookups of C returned (the triplets of those
  completions that touch the entity looked up, in either direction), continued by later lookups of
  a value (film -> director, looked up -> date of death); the chain ends are the values it did not
  look up. The targets are the ends the final thought names ("A came out in 1990, B in 1985" ->
  1990, 1985), else every end. The rule applies in every answer-based target mode
  (``thought_and_answer``, ``answer_only``, ``gold_answer``).
- Labels: a triplet is contributive iff in S_q; a complete step iff it produced >= 1 S_q triplet;
  an explore pair iff its completion produced one; an explore step is kept iff >= 1 contributive pair
  (keeping only those); the final answer step (the ``final`` step, else the last sufficient explore
  step) is always kept.
- Tokens: every count uses the one tokenizer given (default: whitespace tokens), so the figures are
  in one unit. total = sum over steps of tokens(output); filtered = tokens of dropped steps + for each
  kept step that lost pairs/triplets, tokens(output) - tokens(output re-rendered with only the kept
  units) (floored at 0; a kept step that lost nothing is not re-rendered). fa_ratio = filtered / total
  (0 when total is 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from factory.agent.prompts import output_format
from factory.backtrace.answer_passage import Passages, with_answer_passages
from factory.backtrace.checks import STEP_KINDS, BadTrajectory, check_trajectory
from factory.backtrace.graph import build_graph, supporting_subgraph
from factory.backtrace.linking import Embedder
from factory.backtrace.targets import answers_nodes, final_step, final_text, initial_entities, target_entities
from factory.backtrace.tokens import TokenCounter
from factory.params.label_sections import BacktraceParams

# ---------------------------------------------------------------------- step labels and tokens


@dataclass
class StepLabels:
    kept_pair_ids: list[str]
    kept_step_indices: list[int]
    filtered_tokens: int
    total_tokens: int


class _Accounting:
    """Per-trajectory facts for step labels, computed once and shared by every mode."""

    def __init__(self, trajectory: dict, counter: TokenCounter):
        steps = trajectory["steps"]
        order = [s["index"] for s in steps]
        if order != sorted(order):
            steps = sorted(steps, key=_by_index)
        self.steps = steps
        triplets = trajectory["triplets"]
        ids = [t["triplet_id"] for t in triplets]
        self.position = dict(zip(ids, range(len(ids))))  # triplet id -> position in G
        self.step_of = [t["step_index"] for t in triplets]  # by position
        self.pair_of = [t.get("pair_id") for t in triplets]
        self.triplets = triplets
        indices = set(order)
        # the cross-record conditions that would not raise by themselves; anything else malformed
        # raises while labelling and is then diagnosed by check_trajectory
        if (
            len(self.position) != len(triplets)
            or len(indices) != len(steps)
            or not indices.issuperset(self.step_of)
            or not STEP_KINDS.issuperset([s["kind"] for s in steps])
            or not isinstance(trajectory["trajectory_id"], str)
        ):
            check_trajectory(trajectory)
        final = final_step(trajectory)
        final_index = final["index"] if final is not None else None
        self.counter = counter
        self.fmt = output_format(trajectory.get("prompt_version"))  # re-render as the policy was prompted
        tokens = counter.many([s.get("output") for s in steps])
        self.total = sum(tokens)
        self._by_id: dict[str, dict] | None = None
        # per step, what labelling needs, in step order; the final answer step is always kept and a
        # superseded 'final' step (not the last) is always dropped
        self.final_index = final_index
        self.always_filtered = 0
        self.completes: list[tuple[int, int, dict]] = []  # (index, tokens, step)
        self.explores: list[tuple[int, int, dict]] = []
        for step, n in zip(steps, tokens):
            idx = step["index"]
            if idx == final_index:
                continue
            kind = step["kind"]
            if kind == "complete":
                self.completes.append((idx, n, step))
            elif kind == "explore":
                self.explores.append((idx, n, step))
            else:
                self.always_filtered += n

    def order(self, kept: set[str]) -> list[str]:
        """Kept triplet ids in creation order."""
        return sorted(kept, key=self.position.__getitem__)

    def triplet(self, tid: str) -> dict:
        if self._by_id is None:
            self._by_id = {t["triplet_id"]: t for t in self.triplets}
        return self._by_id[tid]

    def labels(self, kept: set[str]) -> StepLabels:
        count, positions = self.counter, [self.position[t] for t in kept]
        step_of, pair_of = self.step_of, self.pair_of
        good_steps = {step_of[n] for n in positions}
        good_pairs = {pair_of[n] for n in positions}
        kept_steps: list[int] = [] if self.final_index is None else [self.final_index]
        filtered = self.always_filtered
        for idx, n, step in self.completes:
            if idx not in good_steps:
                filtered += n
                continue
            pair_id = step.get("pair_id")
            if (
                pair_id
            ):  # a complete step answers its pair: its contributive triplets make the pair contributive
                good_pairs.add(pair_id)
            kept_steps.append(idx)
            own = step.get("triplet_ids") or ()
            keep = [t for t in own if t in kept]
            if len(keep) < len(own):
                rows = [(t["subject"], t["relation"], t["object"]) for t in map(self.triplet, keep)]
                filtered += max(0, n - count(self.fmt.render_complete(rows)))
        kept_pairs: list[str] = []
        for idx, n, step in self.explores:
            pairs = step.get("pairs") or ()
            keep = [p for p in pairs if p["pair_id"] in good_pairs]
            if not keep:
                filtered += n
                continue
            kept_steps.append(idx)
            kept_pairs.extend(p["pair_id"] for p in keep)
            if len(keep) < len(pairs):
                rendered = self.fmt.render_explore(
                    step.get("thought") or "", [(p["entity"], p["relation"]) for p in keep]
                )
                filtered += max(0, n - count(rendered))
        kept_steps.sort()
        return StepLabels(kept_pairs, kept_steps, filtered, self.total)


def _by_index(step: dict) -> int:
    return step["index"]


def step_labels(trajectory: dict, kept: set[str], tokenizer: Any = None) -> StepLabels:
    """Pair/step labels and token accounting for a set of contributive triplet ids."""
    counter = tokenizer if isinstance(tokenizer, TokenCounter) else TokenCounter(tokenizer)
    return _Accounting(trajectory, counter).labels(set(kept))


# ---------------------------------------------------------------------- entry points


class Evidence(TypedDict, total=False):
    """What a caller may give beside the trajectory (every key optional).

    ``tokenizer``: None (whitespace tokens), an object with ``count_tokens(text)``, a HF tokenizer
    or a ``TokenCounter``; its name is recorded. ``embedder``: the loaded ``params.embedding_model``
    (``factory.backtrace.options.load_embedder``; None: no embedding tier) linking at
    ``params.embedding_threshold``. ``gold_answers`` overrides the trajectory's ``answers`` for the
    ``gold_answer`` target mode. ``passages`` (pid -> sentences of the passages that ground the
    triplets) enables the answer-passage rule (``factory.backtrace.answer_passage``) for answers that
    name no node.
    """

    tokenizer: Any
    embedder: Embedder | None
    gold_answers: Sequence[str] | None
    passages: Passages | None


def backtrace_modes(
    trajectory: dict, params: BacktraceParams | None = None, **evidence: Unpack[Evidence]
) -> list[dict]:
    """Labels rows for every (mode, target mode) of ``params.modes`` x ``params.target_modes`` (target
    modes outer), sharing the graph, links and token counts. ``params``: None = the defaults of
    ``factory.params.label_sections.BacktraceParams``; ``evidence``: see ``Evidence``."""
    params = params or BacktraceParams()
    return _label_all(trajectory, params, params.modes, params.target_modes, **evidence)


def backtrace(trajectory: dict, params: BacktraceParams | None = None, **evidence: Unpack[Evidence]) -> dict:
    """Backtrace one trajectory: the ``schemas.LABELS`` row for ``params.mode`` and ``params.target_mode``
    (the supervision set's). ``params``: None = the defaults of
    ``factory.params.label_sections.BacktraceParams``; ``evidence``: see ``Evidence``."""
    params = params or BacktraceParams()
    return _label_all(trajectory, params, (params.mode,), (params.target_mode,), **evidence)[0]


def _label_all(
    trajectory: dict,
    params: BacktraceParams,
    modes: Sequence[str],
    target_modes: Sequence[str],
    *,
    tokenizer: Any = None,
    embedder: Embedder | None = None,
    gold_answers: Sequence[str] | None = None,
    passages: Passages | None = None,
) -> list[dict]:
    """The rows of every (mode, target mode); a malformed record raises ``BadTrajectory`` naming its field."""
    counter = tokenizer if isinstance(tokenizer, TokenCounter) else TokenCounter(tokenizer)
    try:
        accounting = _Accounting(trajectory, counter)  # validates the cross-record ids first
        labelling = _Labelling(trajectory, params, embedder, gold_answers, passages)
        return [
            labelling.row(accounting, kept, mode, target_mode, targets)
            for target_mode in target_modes
            for kept, mode, targets in labelling.supporting(target_mode, modes)
        ]
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        tid = check_trajectory(trajectory)  # names the bad field; if it finds none, report the raw error
        raise BadTrajectory(tid, "record", f"cannot be backtraced ({type(exc).__name__}: {exc})") from None


class _Labelling:
    """One trajectory's graph G and initial entities, shared by every (mode, target mode)."""

    def __init__(
        self,
        trajectory: dict,
        params: BacktraceParams,
        embedder: Embedder | None,
        gold_answers: Sequence[str] | None,
        passages: Passages | None,
    ):
        self.trajectory, self.params = trajectory, params
        self.gold_answers, self.passages = gold_answers, passages
        self.graph = build_graph(trajectory["triplets"], params, embedder)
        self.initial = initial_entities(trajectory, self.graph, params)
        self.texts = final_text(trajectory)
        triplets = trajectory["triplets"]
        self.source_of = {t["triplet_id"]: t.get("source_pid") for t in triplets} if passages else {}

    def supporting(self, target_mode: str, modes: Sequence[str]):
        """(S_q, mode, targets) for every mode under one target mode (answer passages added, when given)."""
        trajectory, graph = self.trajectory, self.graph
        targets = target_entities(
            trajectory,
            graph,
            target_mode,
            initial=self.initial,
            gold_answers=self.gold_answers,
            texts=self.texts,
        )
        paths_graph = graph
        answers = _answers_of(trajectory, target_mode, self.texts, self.gold_answers) if self.passages else []
        if answers and not answers_nodes(answers, graph):
            paths_graph, stated = with_answer_passages(graph, answers, self.source_of, self.passages)
            targets = sorted(set(targets).union(stated))
        for mode in modes:
            yield supporting_subgraph(paths_graph, self.initial, targets, self.params, mode), mode, targets

    def row(
        self, accounting: _Accounting, kept: set[str], mode: str, target_mode: str, targets: list[str]
    ) -> dict:
        """The ``schemas.LABELS`` row of one S_q."""
        trajectory = self.trajectory
        labels = accounting.labels(kept)
        total = labels.total_tokens
        return {
            "trajectory_id": trajectory["trajectory_id"],
            "question_id": trajectory.get("question_id") or "",
            "mode": mode,
            "target_mode": target_mode,
            "correct": bool(trajectory.get("correct")),
            "initial_entities": list(self.initial),
            "target_entities": list(targets),
            "kept_triplet_ids": accounting.order(kept),
            "kept_pair_ids": labels.kept_pair_ids,
            "kept_step_indices": labels.kept_step_indices,
            "path_found": bool(kept),
            "admin_dropped": self.graph.admin_dropped,
            "filtered_tokens": labels.filtered_tokens,
            "total_tokens": total,
            "fa_ratio": labels.filtered_tokens / total if total else 0.0,
            "tokenizer": accounting.counter.name,
        }


def _answers_of(
    trajectory: dict, target_mode: str, texts: tuple[str, str], gold_answers: Sequence[str] | None
) -> list[str]:
    """The answers a target mode targets: the predicted answer, the gold answers, or none."""
    if target_mode in ("thought_and_answer", "answer_only"):
        return [texts[1]] if texts[1] else []
    if target_mode == "gold_answer":
        return list(gold_answers if gold_answers is not None else trajectory.get("answers") or [])
    return []
