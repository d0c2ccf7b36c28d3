"""The KnowTrace authors' backtracing rule, as a control beside the project's S_q.

Written from the rule's described behaviour (not from the authors' code), so that every report can
show the project's labels next to what the published method would have kept on the same trajectory:

- **Graph**: the raw strings (surrounding white space stripped, nothing else: no case folding, no
  article or punctuation rules, no linking) of each completion's *first* triplet only; a later
  triplet of the same completion is no node and no edge. In a trajectory record that is, per
  ``complete`` step, its first triplet in G (G holds a repeated triplet once, under its first step).
- **Initial entities**: nodes whose names occur as substrings (case-sensitive) of the first explore
  step's lookup text (its entity-relation pairs, one ``entity relation`` line each); a trajectory
  without pairs (e.g. a bare graph) falls back to the question.
- **Targets**: nodes whose names occur in the final thought plus the answer, longest name first, each
  match removed from the text before the next name is tried; and every node whose name contains the
  answer.
- **S_q**: the union of all shortest paths between every (initial, target) pair on the undirected
  multigraph; each step a -> b of such a path (walked from the initial entity) keeps the triplets
  written a -> b, and the reverse-direction triplets b -> a only when no triplet is written a -> b.

``first_line_only=False`` keeps every triplet of G as a node and edge: for graphs that were not
generated as completions (``bench/real_graphs.py``: triplets extracted per passage).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping, Sequence


def completion_triplets(trajectory: Mapping, first_line_only: bool = True) -> list[Mapping]:
    """The triplets the rule reads: each complete step's first triplet (or all of G), in G's order."""
    triplets = list(trajectory.get("triplets") or [])
    if not first_line_only:
        return triplets
    seen: set = set()
    out = []
    for t in triplets:
        step = t.get("step_index")
        if step not in seen:
            seen.add(step)
            out.append(t)
    return out


def lookup_text(trajectory: Mapping) -> str:
    """The first explore step's lookup text (its pairs), else the question."""
    explores = [s for s in trajectory.get("steps") or [] if s.get("kind") == "explore" and s.get("pairs")]
    if explores:
        first = min(explores, key=lambda s: s["index"])
        return "\n".join(f"{p['entity']} {p['relation']}" for p in first["pairs"])
    return trajectory.get("question") or ""


def _targets(nodes: Sequence[str], thought: str, answer: str) -> set[str]:
    text = f"{thought} {answer}"
    found: set[str] = set()
    for name in sorted(nodes, key=lambda n: (-len(n), n)):
        if name in text:
            found.add(name)
            text = text.replace(name, " ")
    answer = answer.strip()
    if answer:
        found.update(n for n in nodes if answer in n)
    return found


def _distances(adj: Mapping[str, set[str]], source: str) -> dict[str, int]:
    dist = {source: 0}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def authors_rule(
    trajectory: Mapping,
    *,
    first_line_only: bool = True,
    answer: str | None = None,
    thought: str | None = None,
) -> dict:
    """The rule's initial entities, targets and kept triplet ids (module docstring) for one trajectory.
    ``answer`` / ``thought`` replace the trajectory's own (e.g. the gold answer on a bare graph)."""
    forward: dict[tuple[str, str], list[str]] = defaultdict(list)  # (subject, object) -> triplet ids
    adj: dict[str, set[str]] = defaultdict(set)
    for t in completion_triplets(trajectory, first_line_only):
        s, o = (t.get("subject") or "").strip(), (t.get("object") or "").strip()
        if not s or not o:
            continue
        forward[(s, o)].append(t["triplet_id"])
        if s != o:
            adj[s].add(o)
            adj[o].add(s)
    nodes = sorted({n for pair in forward for n in pair})
    lookup = lookup_text(trajectory)
    initial = sorted(n for n in nodes if n in lookup)
    if answer is None:
        answer = trajectory.get("answer") or ""
    if thought is None:
        thought = trajectory.get("final_thought") or ""
    targets = sorted(_targets(nodes, thought, answer))
    kept: set[str] = set()
    to_target = {t: _distances(adj, t) for t in targets if t in adj}
    for i in initial:
        if i not in adj:
            continue
        from_i = _distances(adj, i)
        for t, from_t in to_target.items():
            if t == i or t not in from_i:
                continue
            length = from_i[t]
            for a, da in from_i.items():
                if da >= length:
                    continue
                for b in adj[a]:
                    if from_t.get(b) == length - da - 1:  # a -> b is a step of a shortest i-t path
                        kept.update(forward.get((a, b)) or forward.get((b, a)) or ())
    return {"initial_entities": initial, "target_entities": targets, "kept_triplet_ids": kept}
