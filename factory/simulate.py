"""Simulated trajectories with known contributive triplets, to measure backtracing (DESIGN §2).

For a real question the gold facts are known; the simulator writes the trajectory an agent would
produce if it looked those facts up, then adds noise at a level x in [0, 1]. The true contributive
set is the gold triplets that made it into the trajectory. Records follow ``schemas.TRAJECTORY``
with ``policy="simulated"`` (never trainable).

Gold facts (``gold_facts``):

- 2WikiMultihopQA: the ``evidences`` triplets as given.
- MuSiQue: one triplet per ``decomposition`` step; ``#k`` references are replaced by step k's answer.
  "X >> relation" steps give (X; relation; answer); natural-language steps give (subject; relation;
  answer) with subject = the referenced answer, else the title of the step's supporting paragraph
  when the sub-question names it, else the longest capitalised span of the sub-question, else that
  title; relation = the sub-question's content words minus the subject's (at most 4). A step with two
  references adds a second triplet from the second referenced answer.
- HotpotQA: one triplet per supporting paragraph, subject = its title (parenthetical dropped), object
  = the first of: the gold answer if the paragraph's supporting sentences contain it (as whole
  words); another supporting title they mention; a salient phrase of the first supporting sentence —
  comparison questions: a number (digits, a date, or a number word), then a capitalised span;
  bridge questions: a capitalised span, then a number; else its last content word. Relation = up to
  3 content words between the subject's mention and the object in the sentence ("related to" if none).
  When the answer is itself a supporting title mentioned by another paragraph B, the fact is (B;
  relation; answer), so the chain ends at the answer.

Hop levels: a fact whose subject is the object of another fact (same node, or whole-word
containment) comes one level after it; the agent explores level 0 in its first step (all parallel
entities at once), level 1 next, and so on.

Noise at level x (each kind scales with x; constants below):

- distractor triplets from non-gold passages of the question's own pool (title; relation; salient
  phrase), ``round(6x)`` of them: half as extra pairs the agent looked up (whole steps to drop), half
  as extra triplets inside true completions (steps kept, re-rendered shorter);
- spurious edges: ``round(3x)`` triplets between a true entity and a distractor entity (drawn from
  two distractor entities, so two spurious edges can form a shortcut between true entities);
- reversed relations: each true triplet is written object -> subject ("<relation> of") with
  probability x/2 (still true: the same fact);
- missing edges: each true hop except the first is dropped with probability x/4;
- surface variants: each entity slot of a true triplet is rewritten with probability x/2 (upper or
  lower case, punctuation, or a partial name: leading or trailing tokens dropped);
- unfaithful final thought with probability x: it names 1-2 distractor entities and leaves out the
  intermediate (bridge) entities.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from factory.agent.format import render_complete, render_explore, render_final
from factory.config import BacktraceParams
from factory.linking import contains_words, is_specific, merge_variants, node_key
from factory.metrics import exact_match, f1
from factory.splits import unit_hash

POLICY = "simulated"
PROMPT_VERSION = "simulated-v1"
N_DISTRACTORS = 6
N_SPURIOUS = 3
P_REVERSE = 0.5
P_MISSING = 0.25
P_VARIANT = 0.5
_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_DATE = re.compile(rf"\b(?:\d{{1,2}} {_MONTH},? \d{{3,4}}|{_MONTH} \d{{1,2}},? \d{{3,4}}|{_MONTH} \d{{3,4}})\b")
_NUM = re.compile(r"(?<![\w.])\d[\d,.]*\d(?:\s+(?:million|billion|thousand|members|species|km|miles|people))?\b|(?<![\w.])\d\b")
_NUM_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty", "hundred", "thousand", "million", "dozen"]
_NUM_WORD = re.compile(r"\b(" + "|".join(_NUM_WORDS) + r")\b", re.IGNORECASE)
_REF = re.compile(r"#(\d+)")
_WH = frozenset(["what", "who", "whom", "whose", "which", "where", "when", "why", "how", "is", "was", "are", "were", "did", "does", "do", "the", "a", "an", "of", "in", "on", "at", "to", "for", "by", "with", "and", "or", "from", "as", "that", "this"])
# derived relation names never use the DTKG administrative keywords ("open source roguelike" would be dropped)
_ADMIN = frozenset(BacktraceParams().admin_relations)
_CONNECT = frozenset({"of", "the", "de", "du", "la", "von", "van", "and", "for", "on", "da", "del", "le"})


@dataclass
class Fact:
    """One gold triplet with its hop level and source passage."""

    subject: str
    relation: str
    object: str
    level: int = 0
    pid: str | None = None


# ---------------------------------------------------------------------- phrases


def _title_name(title: str) -> str:
    """Wikipedia title without its parenthetical: 'Black Book (film)' -> 'Black Book'."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip() or title


def _caps_spans(text: str) -> list[str]:
    """Runs of capitalised words (connectors like 'of' allowed inside), in order of appearance."""
    tokens = re.findall(r"[\w'’.&-]+", text)
    spans, run = [], []
    for n, tok in enumerate(tokens):
        word = tok.strip(".")
        if word[:1].isupper() and not (n == 0 and word.lower() in _WH | {"it", "he", "she", "they", "his", "her", "its", "one"}) or run and word.lower() in _CONNECT:
            run.append(word)
        else:
            if run:
                spans.append(run)
            run = []
    if run:
        spans.append(run)
    out = []
    for run in spans:
        while run and run[-1].lower() in _CONNECT:
            run = run[:-1]
        while run and run[0].lower() in _CONNECT:
            run = run[1:]
        if run:
            out.append(" ".join(run))
    return out


def _numbers(text: str) -> list[str]:
    found = [(m.start(), m.group(0)) for m in _DATE.finditer(text)]
    taken = [(s, s + len(v)) for s, v in found]
    for m in _NUM.finditer(text):
        if not any(a <= m.start() < b for a, b in taken):
            found.append((m.start(), m.group(0).rstrip(".,")))
    for m in _NUM_WORD.finditer(text):
        found.append((m.start(), m.group(0)))
    return [v for _, v in sorted(found)]


def salient_phrase(sentence: str, subject: str, prefer: str = "caps") -> str:
    """A salient entity/value of a sentence that is not the subject (see the module docstring)."""
    subject_key = node_key(subject)

    def fresh(phrase: str) -> bool:
        key = node_key(phrase)
        return bool(key) and key != subject_key and not contains_words(subject_key, key) and not contains_words(key, subject_key)

    caps = [c for c in _caps_spans(sentence) if fresh(c)]
    nums = [n for n in _numbers(sentence) if fresh(n)]
    order = (nums, caps) if prefer == "number" else (caps, nums)
    for group in order:
        if group:
            return group[0]
    words = [w for w in re.findall(r"[A-Za-z]+", sentence) if w.lower() not in _WH and fresh(w)]
    return words[-1] if words else "unknown"


def _relation_between(sentence: str, subject: str, obj: str) -> str:
    low = sentence.lower()
    start = low.find(_title_name(subject).lower())
    start = start + len(_title_name(subject)) if start >= 0 else 0
    end = low.find(obj.lower(), start)
    middle = sentence[start:end] if end > start else sentence[start:]
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", middle) if w.lower() not in _WH and w.lower() not in _ADMIN]
    return " ".join(words[:3]) or "related to"


def _same(a: str, b: str) -> bool:
    ka, kb = node_key(a), node_key(b)
    if ka == kb:
        return True
    return (is_specific(ka) and contains_words(kb, ka)) or (is_specific(kb) and contains_words(ka, kb))


def assign_levels(facts: list[Fact]) -> None:
    """Hop level of each fact: one more than the level of a fact whose object is its subject (in
    place). "The same entity" is decided as backtracing decides it (normalised names, linked variants
    merged, ``factory.linking.merge_variants``), so a faithful trajectory's chain is one chain."""
    keys = [(node_key(f.subject), node_key(f.object)) for f in facts]
    node = merge_variants([k for pair in keys for k in pair], distinct=keys)
    subj = [node[s] for s, _ in keys]
    obj = [node[o] for _, o in keys]
    for f in facts:
        f.level = 0
    for _ in range(len(facts)):
        changed = False
        for n, f in enumerate(facts):
            for m, g in enumerate(facts):
                if m != n and subj[n] == obj[m] and subj[n] != subj[m] and f.level < g.level + 1 <= len(facts):
                    f.level = g.level + 1
                    changed = True
        if not changed:
            break


# ---------------------------------------------------------------------- gold facts per dataset


def _twowiki_facts(q: dict) -> list[Fact]:
    by_title = {node_key(p["title"]): p["pid"] for p in q["passages"]}
    facts = [Fact(e["subject"], e["relation"], e["object"], pid=by_title.get(node_key(e["subject"]))) for e in q.get("evidences") or []]
    assign_levels(facts)
    return facts


def _musique_facts(q: dict) -> list[Fact]:
    steps = q.get("decomposition") or []
    answers = [s["answer"] for s in steps]
    facts: list[Fact] = []
    levels: list[int] = []
    for n, step in enumerate(steps):
        text = step["question"]
        refs = [int(r) - 1 for r in _REF.findall(text) if 0 < int(r) <= n]
        idx = step.get("paragraph_support_idx")
        passage = q["passages"][idx] if idx is not None and 0 <= idx < len(q["passages"]) else None
        title = _title_name(passage["title"]) if passage else ""
        level = 1 + max((levels[r] for r in refs), default=-1)
        levels.append(level)
        if ">>" in text:
            head, relation = (part.strip() for part in text.split(">>", 1))
            subject = answers[refs[0]] if refs else head
        else:
            subject = answers[refs[0]] if refs else _subject_of(text, title, q["question"], step["answer"])
            drop = set(node_key(subject).split())
            words = [w for w in node_key(_REF.sub(" ", text)).split() if w not in _WH and w not in drop and w not in _ADMIN]
            relation = " ".join(words[:4]) or "related to"
        pid = passage["pid"] if passage else None
        facts.append(Fact(subject, relation, step["answer"], level, pid))
        for r in refs[1:]:
            facts.append(Fact(answers[r], relation, step["answer"], level, pid))
    return facts


def _subject_of(sub_question: str, title: str, question: str, answer: str) -> str:
    """Subject of a natural-language MuSiQue sub-question (rule in the module docstring)."""
    text_key = node_key(sub_question)
    candidates = [title] if title and contains_words(text_key, node_key(title)) else []
    spans = _caps_spans(_REF.sub(" ", sub_question)) + [c for c in _caps_spans(question) if contains_words(text_key, node_key(c))]
    candidates += sorted(spans, key=lambda c: (-len(c), c))
    if title:
        candidates.append(title)
    for c in candidates:
        if node_key(c) and not _same(c, answer):
            return c
    words = [w for w in text_key.split() if w not in _WH]
    return " ".join(words[:4]) or sub_question


def _hotpot_facts(q: dict) -> list[Fact]:
    by_pid = {p["pid"]: p for p in q["passages"]}
    titles: list[tuple[str, str]] = []  # (title, pid) in supporting order
    sentences: dict[str, list[str]] = {}
    for s in q["supporting"]:
        p = by_pid.get(s["pid"])
        if p is None:
            continue
        if s["pid"] not in sentences:
            titles.append((p["title"], s["pid"]))
            sentences[s["pid"]] = []
        if 0 <= s["sent_idx"] < len(p["sentences"]):
            sentences[s["pid"]].append(p["sentences"][s["sent_idx"]].strip())
    answer = (q.get("answers") or [""])[0]
    answer_key = node_key(answer)
    comparison = q.get("route") == "parallel"
    facts = []
    for title, pid in titles:
        name = _title_name(title)
        text = " ".join(sentences[pid])
        first = sentences[pid][0] if sentences[pid] else text
        text_key = node_key(text)
        others = [_title_name(t) for t, p in titles if p != pid]
        name_key = node_key(name)
        if (answer_key and answer_key not in ("yes", "no") and contains_words(text_key, answer_key)
                and not contains_words(name_key, answer_key) and not contains_words(answer_key, name_key)):
            obj = answer
        elif any(contains_words(text_key, node_key(o)) and not _same(o, name) for o in others):
            obj = next(o for o in others if contains_words(text_key, node_key(o)) and not _same(o, name))
        else:
            obj = salient_phrase(first, name, prefer="number" if comparison else "caps")
        facts.append(Fact(name, _relation_between(text, name, obj), obj, pid=pid))
    if not comparison and answer_key and not any(node_key(f.object) == answer_key for f in facts):
        # the answer is a supporting title that mentions the bridge: write the chain towards it
        for f in facts:
            if node_key(f.subject) == answer_key and any(g is not f and _same(g.subject, f.object) for g in facts):
                f.subject, f.object, f.relation = f.object, f.subject, f.relation + " of"
    assign_levels(facts)
    return facts


def gold_facts(question: dict) -> list[Fact]:
    """The question's gold triplets with hop levels (rules in the module docstring)."""
    dataset = question["dataset"]
    if dataset == "2wikimultihopqa":
        return _twowiki_facts(question)
    if dataset == "musique":
        return _musique_facts(question)
    if dataset == "hotpotqa":
        return _hotpot_facts(question)
    return []


def distractor_facts(question: dict, n: int, rng: random.Random) -> list[Fact]:
    """Triplets from passages of the question's pool that are not gold supporting paragraphs."""
    gold = {s["pid"] for s in question["supporting"]}
    pool = [p for p in question["passages"] if p["pid"] not in gold and p["sentences"]]
    rng.shuffle(pool)
    facts = []
    for p in pool[:n]:
        name = _title_name(p["title"])
        sentence = p["sentences"][0].strip()
        obj = salient_phrase(sentence, name)
        facts.append(Fact(name, _relation_between(sentence, name, obj), obj, pid=p["pid"]))
    return facts


# ---------------------------------------------------------------------- trajectory assembly

SYSTEM = "Simulated KnowTrace trajectory (policy 'simulated'): a test instrument for backtracing, never training data."


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
            "index": len(steps), "kind": kind, "messages": messages, "output": output, "status": "ok", "error": None,
            "sufficient": extra.get("sufficient"), "thought": extra.get("thought"), "answer": extra.get("answer"),
            "pairs": extra.get("pairs", []), "pair_id": extra.get("pair_id"), "retrieved": extra.get("retrieved", []),
            "triplet_ids": extra.get("triplet_ids", []), "attempts": 1,
            "prompt_tokens": sum(_words(m["content"]) for m in messages), "completion_tokens": _words(output),
            "latency_s": 0.0,
        }
        steps.append(step)
        return step

    for k, pairs in enumerate(iterations):
        thought = (thoughts[k] if thoughts and k < len(thoughts) else None) or "I need to look up " + "; ".join(
            f"the {p.relation} of {p.entity}" for p in pairs) + "."
        ids = []
        for p in pairs:
            ids.append(f"{tid}#p{n_pair}")
            n_pair += 1
        explore_pairs = [{"pair_id": i, "entity": p.entity, "relation": p.relation} for i, p in zip(ids, pairs)]
        add_step("explore", f"Question: {question.get('question', '')}\nKnowledge graph:\n{graph_text()}",
                 render_explore(thought, [(p.entity, p.relation) for p in pairs]), sufficient=False, thought=thought,
                 pairs=explore_pairs)
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
                triplets.append({"triplet_id": t_id, "step_index": index, "pair_id": pair_id, "subject": s, "relation": r,
                                 "object": o, "source_pid": spec[4] if len(spec) > 4 else p.pid, "source_sentence": None,
                                 "grounding_score": None})
                tags[t_id] = spec[3] if len(spec) > 3 else "true"
                new_ids.append(t_id)
            add_step("complete", f"Look up: {p.entity} | {p.relation}",
                     render_complete([(s[0], s[1], s[2]) for s in p.triplets]), pair_id=pair_id,
                     retrieved=[p.pid] if p.pid else [], triplet_ids=new_ids)
    user = f"Question: {question.get('question', '')}\nKnowledge graph:\n{graph_text()}"
    if final_kind == "final":
        add_step("final", user, render_final(final_thought, answer), thought=final_thought, answer=answer)
    else:
        add_step("explore", user, render_explore(final_thought, [], sufficient=True, answer=answer), sufficient=True,
                 thought=final_thought, answer=answer)
    answers = list(question.get("answers") or [])
    em = exact_match(answer, answers) if answers else 0.0
    trajectory = {
        "trajectory_id": tid, "question_id": qid, "dataset": question.get("dataset", ""),
        "split": question.get("split", "train"), "qtype": question.get("qtype", ""), "route": question.get("route", "chain"),
        "policy": policy, "round": 0, "sample": 0, "seed": seed, "question": question.get("question", ""),
        "answers": answers, "prompt_version": PROMPT_VERSION, "model": policy, "status": "ok", "error": None,
        "answer": answer, "final_thought": final_thought, "em": em, "f1": f1(answer, answers) if answers else 0.0,
        "correct": em == 1.0, "rationalized": False, "steps": steps, "triplets": triplets,
    }
    return trajectory, tags


def build_trajectory(question: dict, iterations: list[list[tuple]], final_thought: str, answer: str, **options: Any) -> dict:
    """Convenience for notebooks and tests: iterations as lists of (entity, relation, [triplets])."""
    its = [[SimPair(e, r, list(ts)) for e, r, ts in it] for it in iterations]
    return assemble_trajectory(question, its, final_thought, answer, **options)[0]


# ---------------------------------------------------------------------- noise


def surface_variant(name: str, rng: random.Random) -> str:
    """Another way to write a name: case, punctuation, or a partial name (never empty)."""
    tokens = name.split()
    kinds = ["upper", "lower", "punct"] + (["partial"] if len(tokens) >= 2 else [])
    kind = rng.choice(kinds)
    if kind == "upper":
        return name.upper()
    if kind == "lower":
        return name.lower()
    if kind == "punct":
        return rng.choice([f'"{name}"', name.replace(",", "") + ".", name.replace(" ", " -", 1) if len(tokens) > 1 else f"{name}."])
    keep = tokens[1:] if rng.random() < 0.5 else tokens[-2:] if len(tokens) > 2 else tokens[-1:]
    variant = " ".join(keep).strip(",")
    return variant if node_key(variant) else name


@dataclass
class Simulated:
    trajectory: dict
    truth: dict


def _rng(seed: int, *parts: object) -> random.Random:
    return random.Random(int(unit_hash("simulate", seed, *parts) * 2**53))


def simulate_trajectory(question: dict, noise: float, seed: int = 0, total_triplets: int | None = None) -> Simulated | None:
    """One simulated trajectory for a real question at a noise level (None when it has no gold
    facts). ``total_triplets`` pads with distractor triplets (or trims them) to that many triplets."""
    facts = gold_facts(question)
    if not facts:
        return None
    qid = question["question_id"]
    rng = _rng(seed, qid, f"{noise:.4f}")
    x = max(0.0, min(1.0, float(noise)))
    answer = (question.get("answers") or [""])[0]
    # missing edges: drop hops after the first (never all of them)
    kept_facts = [f for n, f in enumerate(facts) if n == 0 or rng.random() >= P_MISSING * x]
    n_distract = round(N_DISTRACTORS * x)
    n_spurious = round(N_SPURIOUS * x)
    pool = distractor_facts(question, max(n_distract, 2 if n_spurious else 0), rng)
    distractors = pool[:n_distract]
    distractor_entities = [d.subject for d in pool[:2]]
    true_entities = sorted({f.subject for f in kept_facts} | {f.object for f in kept_facts})

    def slot(name: str) -> str:
        return surface_variant(name, rng) if rng.random() < P_VARIANT * x else name

    levels = sorted({f.level for f in kept_facts})
    iterations: list[list[SimPair]] = []
    true_pairs: list[SimPair] = []
    for level in levels:
        pairs: dict[str, SimPair] = {}
        for f in (f for f in kept_facts if f.level == level):
            key = node_key(f.subject)
            if key not in pairs:
                pairs[key] = SimPair(f.subject, f.relation, [], f.pid)
            s, o = slot(f.subject), slot(f.object)
            if rng.random() < P_REVERSE * x:
                pairs[key].triplets.append((o, f"{f.relation} of", s, "true", f.pid))
            else:
                pairs[key].triplets.append((s, f.relation, o, "true", f.pid))
        iterations.append(list(pairs.values()))
        true_pairs.extend(pairs.values())
    if total_triplets is not None:
        n_true = sum(len(p.triplets) for p in true_pairs)
        need = max(0, total_triplets - n_true - n_spurious)
        extra = distractor_facts(question, need, _rng(seed, qid, "pad"))
        while extra and len(extra) < need:  # small pools: reuse passages with other relations
            extra = extra + [Fact(d.subject, f"{d.relation} ({len(extra)})", d.object, pid=d.pid) for d in extra[: need - len(extra)]]
        distractors = extra[:need]
    for n, d in enumerate(distractors):
        spec = (d.subject, d.relation, d.object, "distractor", d.pid)
        if n % 2 == 0:  # an extra pair the agent looked up
            iterations[rng.randrange(len(iterations))].append(SimPair(d.subject, d.relation, [spec], d.pid))
        else:  # an irrelevant extra triplet inside a true completion
            rng.choice(true_pairs).triplets.append(spec)
    for _ in range(n_spurious if distractor_entities else 0):
        t, d = rng.choice(true_entities), rng.choice(distractor_entities)
        spec = (t, "associated with", d, "spurious", None) if rng.random() < 0.5 else (d, "associated with", t, "spurious", None)
        rng.choice(true_pairs).triplets.append(spec)
    unfaithful = rng.random() < x
    final_thought = _thought(question, kept_facts, answer, distractor_entities if unfaithful else None, rng)
    final_kind = "final" if unit_hash("final-kind", qid) < 0.25 else "explore"
    tid = f"{POLICY}/{qid}/x{x:.2f}"
    trajectory, tags = assemble_trajectory(question, iterations, final_thought, answer, trajectory_id=tid,
                                           final_kind=final_kind, seed=seed)
    truth = true_labels(trajectory, tags)
    truth.update({"noise": x, "unfaithful": unfaithful, "dropped_hops": len(facts) - len(kept_facts), "gold_facts": len(facts)})
    return Simulated(trajectory, truth)


def _thought(question: dict, facts: list[Fact], answer: str, distractors: list[str] | None, rng: random.Random) -> str:
    if distractors:
        named = distractors[: rng.choice([1, 2])] if len(distractors) > 1 else distractors
        return f"Going by what I found about {' and '.join(named)}, the answer is {answer}."
    parts = [f"{f.subject} {f.relation} {f.object}." for f in sorted(facts, key=lambda f: f.level)]
    return " ".join(parts) + f" So the answer is {answer}."


def true_labels(trajectory: dict, tags: dict[str, str]) -> dict:
    """The true contributive triplets, pairs and steps of a simulated trajectory (same step rules as
    backtracing, applied to the known truth)."""
    true_ids = [t["triplet_id"] for t in trajectory["triplets"] if tags.get(t["triplet_id"]) == "true"]
    true_steps = {t["step_index"] for t in trajectory["triplets"] if t["triplet_id"] in set(true_ids)}
    by_index = {s["index"]: s for s in trajectory["steps"]}
    true_pairs = {by_index[i]["pair_id"] for i in true_steps}
    steps = set(true_steps)
    for s in trajectory["steps"]:
        if s["kind"] == "explore" and any(p["pair_id"] in true_pairs for p in s["pairs"]):
            steps.add(s["index"])
        if s["kind"] == "final" or (s["kind"] == "explore" and s.get("sufficient")):
            steps.add(s["index"])
    return {
        "trajectory_id": trajectory["trajectory_id"], "question_id": trajectory["question_id"],
        "dataset": trajectory["dataset"], "route": trajectory["route"], "qtype": trajectory["qtype"],
        "true_triplet_ids": true_ids, "true_pair_ids": sorted(true_pairs), "true_step_indices": sorted(steps),
        "n_triplets": len(trajectory["triplets"]),
    }


def sample_questions(questions: list[dict], n_per_dataset: int, seed: int) -> list[dict]:
    """Up to n questions per dataset that have gold facts, chosen with a seeded RNG (sorted by id)."""
    chosen = []
    for dataset in sorted({q["dataset"] for q in questions}):
        usable = sorted((q for q in questions if q["dataset"] == dataset and gold_facts(q)), key=lambda q: q["question_id"])
        rng = _rng(seed, "sample", dataset)
        picked = rng.sample(usable, min(n_per_dataset, len(usable)))
        chosen.extend(sorted(picked, key=lambda q: q["question_id"]))
    return chosen


def simulate(questions: list[dict], noise_levels: list[float], seed: int = 0) -> list[Simulated]:
    """Every question at every noise level (questions without gold facts are skipped)."""
    out = []
    for q in questions:
        for x in noise_levels:
            sim = simulate_trajectory(q, x, seed)
            if sim is not None:
                out.append(sim)
    return out
