"""Constrained decoding on the local backend (models/base, SmolLM2-135M-Instruct), the demo's settings.

(e1) parse errors and EM: the demo's round-0 trajectories sample (``trajectories``: training
     questions, sampled at its temperature) and its base evaluation sample (``evaluate``: held-out,
     greedy), each run through the stages' own driver (``generate_trajectories``: shards, lockstep
     batches) for every prompt version x constrained decoding off / on. The parse-error share is the
     share of trajectories whose status is ``parse_error``; EM is exact match on the gold answers.
(e2) tokens/s of constrained over unconstrained generation: the demo's first explore prompts, one
     batch of ``llm.batch_size``, greedy, alternating the two modes, plus the share of the
     constrained run spent computing and applying grammar masks (target: ratio >= 0.9).

``python bench/constrained.py [--model models/base] [--versions knowtrace-v1 knowtrace-json-v1]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.common import print_table  # noqa: E402 (after the sys.path line)

VERSIONS = ("knowtrace-v1", "knowtrace-json-v1")


def demo_inputs(params):
    """The demo's corpora, ingested here, and a BM25 index over all passages (as the index stage builds
    it)."""
    from factory.corpora.ingest import ingest_sources
    from factory.retrieval.bm25 import BM25Retriever

    result = ingest_sources(params)
    passages = {p["pid"]: p for p in result.passages}
    return result.questions, passages, BM25Retriever.build(result.passages, params.index)


def demo_samples(params, questions):
    """(name, questions, sampling) of the demo's round-0 trajectories and its base evaluation (seed 0)."""
    from factory.execution.sampling import evaluation_sample, round_sample

    train, sampled = round_sample(params, questions, 0, 0)
    heldout, greedy = evaluation_sample(params, questions, "heldout")
    return [("trajectories r0", train, sampled), ("evaluate base", heldout, greedy)]


def parse_errors_and_em(params, model_dir: Path, versions=VERSIONS) -> list[dict]:
    """(e1): one row per sample x prompt version x constrained."""
    from factory.agent.policy import Policy
    from factory.execution.generate import generate_trajectories
    from factory.llm.local import LocalLLM

    questions, passages, retriever = demo_inputs(params)
    llm = LocalLLM(params.llm.model_copy(update={"model": str(model_dir)}))
    rows = []
    try:
        for name, chosen, sampling in demo_samples(params, questions):
            for version in versions:
                for constrained in ("off", "on"):
                    p = params.model_copy(deep=True)
                    p.agent.prompt_version = version
                    p.llm.constrained = constrained
                    t0 = time.perf_counter()
                    with tempfile.TemporaryDirectory() as tmp:
                        records = generate_trajectories(
                            p,
                            chosen,
                            llm=llm,
                            retriever=retriever,
                            passages=passages,
                            policy=Policy("base", None, -1),
                            round_=0,
                            samples=1,
                            sampling=sampling,
                            out_path=Path(tmp) / "out.parquet",
                            run_id=f"bench/{name}",
                            desc=f"{name} {version}",
                        )
                    steps = [s for r in records for s in r["steps"]]
                    rows.append(
                        {
                            "sample": name,
                            "version": version,
                            "constrained": constrained,
                            "trajectories": len(records),
                            "parse_error": sum(r["status"] == "parse_error" for r in records),
                            "llm_error": sum(r["status"] == "llm_error" for r in records),
                            "steps_unparsed": sum(s["status"] == "parse_error" for s in steps),
                            "steps": len(steps),
                            "repaired": sum(s["attempts"] > 1 for s in steps),
                            "em": sum(r["em"] for r in records) / len(records),
                            "f1": sum(r["f1"] for r in records) / len(records),
                            "tokens": sum(r["completion_tokens"] for r in records),
                            "wall_s": time.perf_counter() - t0,
                        }
                    )
                    print(rows[-1], flush=True)
    finally:
        llm.close()
    return rows


def tokens_per_second(params, model_dir: Path, version: str, repeats: int = 2) -> dict:
    """(e2): the same batch of explore prompts, unconstrained and constrained, alternating."""
    from factory.agent import prompts
    from factory.agent.loop import step_constraints
    from factory.llm.base import ChatRequest, Sampling
    from factory.llm.constrain import GrammarProcessor
    from factory.llm.local import LocalLLM

    questions, _, _ = demo_inputs(params)
    name, chosen, _ = demo_samples(params, questions)[0]
    n = params.llm.batch_size
    chosen = (chosen * ((n + len(chosen) - 1) // len(chosen)))[:n]
    sampling = Sampling(max_new_tokens=params.llm.max_new_tokens, stop=prompts.prompt_set(version).stop)
    constraint = step_constraints(version, params.agent.max_pairs)["explore"]
    free = [ChatRequest.of(prompts.explore_messages(version, q["question"], []), sampling) for q in chosen]
    bound = [ChatRequest(r.messages, r.sampling, r.sample, constraint) for r in free]
    llm = LocalLLM(params.llm.model_copy(update={"model": str(model_dir)}))  # batches of n
    llm.generate(free[:2]), llm.generate(bound[:2])  # warm-up: weights, grammar engine, compiled grammar
    spent = {"free": [0.0, 0], "bound": [0.0, 0]}
    in_masks = [0.0]
    call = GrammarProcessor.__call__

    def timed(self, input_ids, scores):
        t0 = time.perf_counter()
        try:
            return call(self, input_ids, scores)
        finally:
            in_masks[0] += time.perf_counter() - t0

    GrammarProcessor.__call__ = timed
    try:
        for _ in range(repeats):
            for mode, requests in (("free", free), ("bound", bound)):
                t0 = time.perf_counter()
                out = llm.generate(requests)
                spent[mode][0] += time.perf_counter() - t0
                spent[mode][1] += sum(r.completion_tokens for r in out)
    finally:
        GrammarProcessor.__call__ = call
        llm.close()
    free_tps = spent["free"][1] / spent["free"][0]
    bound_tps = spent["bound"][1] / spent["bound"][0]
    return {
        "version": version,
        "model": llm.identity,
        "device": llm.device,
        "batch": n,
        "free_tokens_per_s": free_tps,
        "constrained_tokens_per_s": bound_tps,
        "ratio": bound_tps / free_tps,
        "mask_share": in_masks[0] / spent["bound"][0],
        "free_tokens": spent["free"][1],
        "constrained_tokens": spent["bound"][1],
    }


def report(model_dir: Path, versions=VERSIONS, skip_em: bool = False) -> None:
    from factory.params.config import load_params

    params = load_params(ROOT / "params.yaml")
    params.corpora = {k: [str((ROOT / p).resolve()) for p in v] for k, v in params.corpora.items()}
    if not skip_em:
        rows = parse_errors_and_em(params, model_dir, versions)
        print_table(
            f"(e1) base model {model_dir.name}, the demo's settings: parse errors and EM, constrained "
            "off / on",
            [
                (
                    f"{r['sample']} {r['version']} {r['constrained']}",
                    f"{r['parse_error']}/{r['trajectories']} parse_error",
                    f"EM {r['em']:.3f}  F1 {r['f1']:.3f}  unparsed steps {r['steps_unparsed']}/{r['steps']}  "
                    f"repaired {r['repaired']}  llm_error {r['llm_error']}  {r['tokens']} tokens "
                    f"{r['wall_s']:.0f} s",
                )
                for r in rows
            ],
        )
    for version in versions:
        t = tokens_per_second(params, model_dir, version)
        print_table(
            f"(e2) local generation {t['model']} on {t['device']}, {version}: one batch of {t['batch']} "
            "explore prompts, greedy",
            [
                ("unconstrained tokens/s", f"{t['free_tokens_per_s']:.1f}", f"{t['free_tokens']} tokens"),
                (
                    "constrained tokens/s",
                    f"{t['constrained_tokens_per_s']:.1f}",
                    f"{t['constrained_tokens']} tokens",
                ),
                ("constrained / unconstrained", f"{t['ratio']:.2f}", "target >= 0.9"),
                ("share of constrained time in grammar masks", f"{t['mask_share']:.3f}", ""),
                ("machine load (1 min) / cores", f"{os.getloadavg()[0]:.1f} / {os.cpu_count()}", ""),
            ],
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "base")
    parser.add_argument("--versions", nargs="+", default=list(VERSIONS))
    parser.add_argument("--skip-em", action="store_true", help="only (e2), the tokens/s ratio")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("FACTORY_NO_PROGRESS", "1")
    if not (args.model / "config.json").exists():
        print(f"\n(e) skipped: {args.model} does not exist — run `factory prepare-model` first")
        return
    report(args.model, args.versions, args.skip_em)


if __name__ == "__main__":
    main()
