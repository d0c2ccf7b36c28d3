"""Decontamination at full size: about 300k pool questions against about 22k evaluation questions, timed
with peak memory, beside an all-pairs baseline measured in the same run, at two sizes to show growth.

The questions are synthesised from the shared samples (bench/decontamination_synth.py: real skeletons with
other real titles and rare words filled in, at the sizes of the official files: 22,398 dev questions and
277,839 train questions), plus the real dev records (1,677) on the evaluation side and the contaminated
cases bench/decontamination_cases.py builds from them planted in the pool (30k at full size), so that the
recall of each kind of case is measured at full size too, where the IDF weights differ from the small
bench's. Each size runs in its own child process, so its peak RSS is its own; the pool is streamed in
batches of ``batch_size`` and never held. The baselines, on samples of the pool extrapolated to all of it
on the same cores: all-pairs rapidfuzz ``ratio`` >= 95 (the fuzzy rule of OpenThoughts; ``process.cdist``,
every core) and all pairs of our own near-duplicate score (what the index spares).

    .venv/bin/python bench/decontamination.py          # 1/10 size and full size (about two minutes)
    .venv/bin/python bench/decontamination.py --tune   # first, the sweep that chose the index settings
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.decontamination_cases import CHAIN, EXACT, NEGATIVES, REWORDING, SURFACE, build_cases  # noqa: E402
from bench.decontamination_setup import is_dev, machine, real_questions  # noqa: E402
from bench.decontamination_synth import TRAIN_SIZES, Synthesiser  # noqa: E402
from factory.decontamination.index import EvalIndex  # noqa: E402
from factory.decontamination.rows import eval_row, eval_set_label  # noqa: E402
from factory.params.data_sections import DecontaminationParams  # noqa: E402

BASELINE_SAMPLE = 1000  # pool questions the all-pairs rapidfuzz baseline scores
SCORER_SAMPLE = 20  # pool questions the all-pairs run of our own scorer scores (it is Python: slow)
CANDIDATE_MIN = (0.3, 0.4, 0.5, 0.6, 0.7)
MAX_DF = (0.002, 0.005, 0.01)
RECALL_TOLERANCE = 0.001  # index settings that lose less recall than this are as good: the fastest is kept
GROUPS = {
    "exact": EXACT,
    "surface": SURFACE,
    "rewording": REWORDING,
    "same chain": CHAIN,
    "negatives": NEGATIVES,
}


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # Linux: KiB


def run_size(scale: float) -> dict:
    """One size, in this process: index the evaluation side, stream the pool, count what is flagged."""
    params = DecontaminationParams()
    real = real_questions()
    dev = [q for q in real if is_dev(q)]
    synth = Synthesiser(real)
    evals = [eval_row(q) for q in dev] + synth.eval_rows(scale)
    qid = {(e["eval_set"], e["eval_id"]): q["question_id"] for e, q in zip(evals, dev)}
    cases = build_cases(dev)[:: max(1, round(1 / scale))]  # planted at the same rate at every size
    n_batches = math.ceil(sum(round(n * scale) for n in TRAIN_SIZES.values()) / params.batch_size)
    per_batch = math.ceil(len(cases) / n_batches)
    start_rss = rss_mb()
    t0 = time.perf_counter()
    index = EvalIndex(evals, params)
    build_s, index_rss = time.perf_counter() - t0, rss_mb()
    match_s, pool, rules, hits = 0.0, 0, Counter(), defaultdict(list)
    for b, batch in enumerate(synth.pool_batches(scale, params.batch_size)):
        planted = cases[b * per_batch : (b + 1) * per_batch]
        rows = batch + [c.row for c in planted]
        t = time.perf_counter()
        found = index.matches(rows)
        match_s += time.perf_counter() - t
        pool += len(rows)
        rules.update(f[0].rule if f else "none" for f in found[: len(batch)])
        for c, f in zip(planted, found[len(batch) :], strict=True):
            hits[c.kind].append(_detected(c, f, qid))
    return {
        "scale": scale,
        "eval": len(evals),
        "pool": pool,
        "planted": sum(len(v) for v in hits.values()),
        "build_s": build_s,
        "match_s": match_s,
        "start_rss_mb": start_rss,
        "index_rss_mb": index_rss,
        "peak_rss_mb": peak_mb(),
        "synthetic_flagged": dict(rules),
        "recall": {kind: [sum(v), len(v)] for kind, v in hits.items()},
    }


def _detected(case, found, qid) -> bool:
    """A positive: its record matched; a negative: anything but its donors matched (a false positive)."""
    ids = [qid.get((m.eval_set, m.eval_id)) for m in found]
    if case.expected is None:
        return any(i not in case.exclude for i in ids)
    return case.origin["question_id"] in ids


def run_tune(scale: float) -> dict:
    """The index settings swept at this size: candidates per pool row and seconds per 10k on one batch of
    the synthetic pool, and the near-duplicate recall of the planted edits (surface and rewording)."""
    real = real_questions()
    dev = [q for q in real if is_dev(q)]
    synth = Synthesiser(real)
    evals = [eval_row(q) for q in dev] + synth.eval_rows(scale)
    batch = next(synth.pool_batches(scale, 10_000))
    edits = [c for c in build_cases(dev) if c.kind in SURFACE + REWORDING]
    out = []
    for max_df in MAX_DF:
        for candidate_min in CANDIDATE_MIN:
            index = EvalIndex(evals, DecontaminationParams(candidate_min=candidate_min, max_df=max_df))
            weighed = [index.vocab.weigh(r["question_norm"]) for r in batch]
            candidates = sum(map(len, index._near_candidates(weighed))) / len(batch)
            t = time.perf_counter()
            index.matches(batch)
            seconds = (time.perf_counter() - t) * 10_000 / len(batch)
            found = index.matches([c.row for c in edits])
            hit = [
                any(m.rule == "near_duplicate" and _of(m, c.origin) for m in f) for c, f in zip(edits, found)
            ]
            out.append(
                {
                    "max_df": max_df,
                    "candidate_min": candidate_min,
                    "candidates": candidates,
                    "s_per_10k": seconds,
                    "recall": sum(hit) / len(hit),
                    "edits": len(hit),
                }
            )
    return {"scale": scale, "eval": len(evals), "sweep": out}


def _of(match, record: dict) -> bool:
    return (match.eval_set, match.eval_id) == (eval_set_label(record), record["source_id"])


def run_baseline(scale: float) -> dict:
    """All pairs, on samples of the pool extrapolated to all of it: rapidfuzz ratio (C, every core) of
    BASELINE_SAMPLE pool questions against every evaluation question, and our own near-duplicate score of
    SCORER_SAMPLE of them (what the index spares)."""
    from rapidfuzz import fuzz, process

    real = real_questions()
    synth = Synthesiser(real)
    evals = [eval_row(q) for q in real if is_dev(q)] + synth.eval_rows(scale)
    norms = [e["question_norm"] for e in evals]
    sample = next(synth.pool_batches(scale, BASELINE_SAMPLE))
    t = time.perf_counter()
    for start in range(0, len(sample), 100):  # 100 rows at a time: the score matrix stays small
        rows = [r["question_norm"] for r in sample[start : start + 100]]
        process.cdist(rows, norms, scorer=fuzz.ratio, score_cutoff=95, workers=-1)
    ratio_s = time.perf_counter() - t
    index = EvalIndex(evals, DecontaminationParams())
    t = time.perf_counter()
    for row in sample[:SCORER_SAMPLE]:
        weighed = index.vocab.weigh(row["question_norm"])
        for i in range(len(index)):
            index._similarity(weighed, i)
    scorer_s = time.perf_counter() - t
    pool = sum(round(n * scale) for n in TRAIN_SIZES.values())
    return {
        "eval": len(evals),
        "pool": pool,
        "ratio_sample": len(sample),
        "ratio_s": ratio_s,
        "scorer_sample": SCORER_SAMPLE,
        "scorer_s": scorer_s,
    }


def child(kind: str, scale: float) -> dict:
    """Run one measurement in a child process (its own peak RSS); it prints its figures as JSON."""
    cmd = [sys.executable, __file__, "--child", kind, "--scales", str(scale)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def report_tune(tune: dict, params: DecontaminationParams) -> None:
    sweep = tune["sweep"]
    print(
        f"\nindex settings at full size ({tune['eval']:,} eval questions; one 10k batch of the pool; "
        f"near_duplicate recall of the {sweep[0]['edits']:,} planted edits)"
    )
    print(f"  {'max_df':>7} {'candidate_min':>13} {'candidates/row':>15} {'s per 10k':>10} {'recall':>8}")
    for r in sweep:
        print(
            f"  {r['max_df']:>7} {r['candidate_min']:>13} {r['candidates']:>15.1f} {r['s_per_10k']:>10.2f} "
            f"{r['recall']:>8.2%}"
        )
    best = max(r["recall"] for r in sweep)
    kept = min((r for r in sweep if r["recall"] >= best - RECALL_TOLERANCE), key=lambda r: r["s_per_10k"])
    print(
        f"  kept (the fastest within {RECALL_TOLERANCE:.1%} of the best recall): max_df {kept['max_df']}, "
        f"candidate_min {kept['candidate_min']}; the defaults are max_df {params.max_df}, candidate_min "
        f"{params.candidate_min}"
        + (
            ""
            if (kept["max_df"], kept["candidate_min"]) == (params.max_df, params.candidate_min)
            else "  <- DIFFER"
        )
    )


def report(runs: list[dict], baseline: dict) -> None:
    print(
        f"\n{'size':>6} {'eval':>7} {'pool':>8} {'index s':>8} {'match s':>8} {'pool/s':>8} "
        f"{'index MB':>9} {'peak RSS MB':>12}"
    )
    for r in runs:
        print(
            f"{r['scale']:>6g} {r['eval']:>7,} {r['pool']:>8,} {r['build_s']:>8.1f} {r['match_s']:>8.1f} "
            f"{r['pool'] / r['match_s']:>8,.0f} {r['index_rss_mb'] - r['start_rss_mb']:>9.0f} "
            f"{r['peak_rss_mb']:>12.0f}"
        )
    print(
        "  (index MB: RSS added by building the index; peak RSS: the whole child, the ingest of the samples, "
        "the built cases and the synthesiser included)"
    )
    if len(runs) > 1:
        a, b = runs[0], runs[-1]
        ta, tb = a["build_s"] + a["match_s"], b["build_s"] + b["match_s"]
        print(
            f"growth: time x{tb / ta:.1f} for pool x{b['pool'] / a['pool']:.1f} and eval "
            f"x{b['eval'] / a['eval']:.1f}"
            f" (all pairs would grow x{b['pool'] * b['eval'] / (a['pool'] * a['eval']):.0f})"
        )
    full = runs[-1]
    ours = full["build_s"] + full["match_s"]
    ratio_s = baseline["ratio_s"] / baseline["ratio_sample"] * full["pool"]
    scorer_s = baseline["scorer_s"] / baseline["scorer_sample"] * full["pool"]
    print(f"ours, all three rules: {ours / 60:.1f} min for {full['pool']:,} x {full['eval']:,}")
    print(
        f"baseline all-pairs rapidfuzz ratio >= 95 ({baseline['ratio_sample']:,} pool questions in "
        f"{baseline['ratio_s']:.1f} s): {ratio_s / 60:.1f} min extrapolated, {ratio_s / ours:.1f}x ours"
    )
    print(
        f"baseline all-pairs of our near-duplicate score ({baseline['scorer_sample']} pool questions in "
        f"{baseline['scorer_s']:.1f} s): {scorer_s / 3600:.1f} h extrapolated, {scorer_s / ours:.0f}x ours"
    )
    flagged = full["synthetic_flagged"]
    print(f"synthetic pool questions flagged (strongest rule) at full size: {flagged}")
    print("planted cases at full size (negatives: false-positive rate)")
    for group, kinds in GROUPS.items():
        cells = [
            f"{k} {full['recall'][k][0] / full['recall'][k][1]:.1%} of {full['recall'][k][1]}"
            for k in kinds
            if k in full["recall"]
        ]
        print(f"  {group:10}  " + "; ".join(cells))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--tune", action="store_true", help="sweep the index settings at the largest size")
    parser.add_argument("--child", choices=["size", "baseline", "tune"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run = {"size": run_size, "baseline": run_baseline, "tune": run_tune}[args.child]
        print(json.dumps(run(args.scales[0])))
        return
    start = time.perf_counter()
    params = DecontaminationParams()
    print(f"machine: {machine()}")
    print(f"params: {params.model_dump(exclude={'eval_sets'})}")
    if args.tune:
        report_tune(child("tune", args.scales[-1]), params)
    runs = [child("size", scale) for scale in args.scales]
    report(runs, child("baseline", args.scales[-1]))
    print(f"bench time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
