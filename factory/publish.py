"""Publish each variant's final supervision set as a Hugging Face dataset folder.

The final set of a variant is the union of the examples of every round of its first protocol seed's
chain that ran (with ``variants.accumulate`` that is the last round's accumulated set). The folder
holds parquet shards under ``data/`` and a dataset card (README.md with a YAML header) stating the
licenses inherited from the sources, the source datasets, the generating model and adapters, the
prompt version, the parameters, counts, the FA ratio and the relevance-label scores. It loads with
``datasets.load_dataset("parquet", data_files=...)`` or ``datasets.load_dataset(<folder>)``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from factory import paths
from factory.errors import FactoryError
from schemas import SUPERVISION, read_rows, to_table

LICENSES = {"hotpotqa": "cc-by-sa-4.0", "2wikimultihopqa": "apache-2.0", "musique": "cc-by-4.0"}
SOURCES = {
    "hotpotqa": "hotpot_qa (distractor setting), https://hotpotqa.github.io",
    "2wikimultihopqa": "2WikiMultihopQA, https://github.com/Alab-NII/2wikimultihop",
    "musique": "MuSiQue-Answerable, https://github.com/StonyBrookNLP/musique",
}
SHARD_ROWS = 50_000


def final_examples(variant: str, seed: int, rounds: int) -> tuple[list[dict], list[int]]:
    """Union of a chain's round sets (by example id, first occurrence kept) and the rounds that ran."""
    seen, examples, ran = set(), [], []
    for r in range(rounds):
        stats_path = paths.supervision_dir(variant, r, seed) / "stats.json"
        data_path = paths.supervision_dir(variant, r, seed) / "train.parquet"
        if not data_path.exists():
            continue
        stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
        if stats.get("status") == "skipped":
            continue
        ran.append(r)
        for row in read_rows(data_path):
            if row["example_id"] not in seen:
                seen.add(row["example_id"])
                examples.append(row)
    return examples, ran


def _card(variant: str, examples: list[dict], info: dict) -> str:
    datasets = sorted({e["dataset"] for e in examples}) or sorted(info.get("datasets", []))
    header = {
        "license": sorted({LICENSES[d] for d in datasets if d in LICENSES}) or "other",
        "language": ["en"],
        "pretty_name": f"TraceFactory {variant} supervision set",
        "task_categories": ["question-answering", "text-generation"],
        "tags": ["multi-hop-qa", "rag", "knowtrace", "self-training", "synthetic"],
        "source_datasets": [SOURCES[d] for d in datasets if d in SOURCES],
        "size_categories": [
            "n<1K" if len(examples) < 1000 else "1K<n<10K" if len(examples) < 10_000 else "10K<n<100K"
        ],
        "configs": [
            {"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*.parquet"}]}
        ],
    }
    by_kind: dict[str, int] = {}
    for e in examples:
        by_kind[e["step_kind"]] = by_kind.get(e["step_kind"], 0) + 1
    body = [
        f"# TraceFactory — `{variant}` supervision set",
        "",
        "Chat-format SFT examples (one per kept step of a correct KnowTrace trajectory: the step's "
        "prompt, then",
        "the kept output as the assistant turn) built by [TraceFactory](README) from multi-hop QA corpora.",
        {
            "backtrace": "Only generations that contributed to the correct answer (knowledge "
                         "backtracing) are kept.",
            "random": "Control set: per trajectory, as many units removed as backtracing removed, chosen "
                      "at random.",
            "unfiltered": "Every generation of every correct trajectory (STaR-style).",
        }.get(variant, ""),
        "",
        "## Provenance",
        "",
        f"- generating policies: {', '.join(info['policies']) or 'none'}",
        f"- model: `{info['model']}`",
        f"- prompt version: `{info['prompt_version']}`",
        f"- rounds included: {info['rounds']}",
        "- licenses inherited from the sources: "
        f"{', '.join(header['license']) if isinstance(header['license'], list) else header['license']}"
        + (" (HotpotQA is CC BY-SA 4.0: derived data is share-alike)" if "hotpotqa" in datasets else ""),
        "",
        "## Counts",
        "",
        f"- examples: {len(examples)} "
        f"({', '.join(f'{k}: {v}' for k, v in sorted(by_kind.items())) or 'none'})",
        f"- trajectories: {len({e['trajectory_id'] for e in examples})}; questions: "
        f"{len({e['question_id'] for e in examples})}",
        f"- by dataset: {json.dumps({d: sum(e['dataset'] == d for e in examples) for d in datasets})}",
        f"- FA ratio (generated tokens removed / all, over correct trajectories): {info['fa_ratio']}",
        "",
        "## Relevance labels vs gold supporting facts",
        "",
        "```json",
        json.dumps(info["relevance"], indent=2, sort_keys=True),
        "```",
        "",
        "## Parameters",
        "",
        "```yaml",
        yaml.safe_dump(info["params"], sort_keys=True).rstrip(),
        "```",
    ]
    return "---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + "\n".join(body) + "\n"


def publish_variant(variant: str, out_dir: str | Path, info: dict, seed: int, rounds: int) -> dict:
    """Write the dataset folder; returns its counts."""
    examples, ran = final_examples(variant, seed, rounds)
    out = Path(out_dir)
    shutil.rmtree(out, ignore_errors=True)
    (out / "data").mkdir(parents=True)
    table = to_table(examples, SUPERVISION, "supervision") if examples else SUPERVISION.empty_table()
    shards = max(1, -(-table.num_rows // SHARD_ROWS))
    for i in range(shards):
        part = table.slice(i * SHARD_ROWS, SHARD_ROWS)
        pq.write_table(part, out / "data" / f"train-{i:05d}-of-{shards:05d}.parquet", compression="zstd")
    info = {**info, "rounds": ran, "policies": sorted({e["policy"] for e in examples})}
    (out / "README.md").write_text(_card(variant, examples, info), encoding="utf-8")
    return {"variant": variant, "examples": table.num_rows, "rounds": ran, "shards": shards, "path": str(out)}


def push_to_hub(folder: str | Path, repo: str) -> None:
    """Upload a published folder to the Hub (token from HF_TOKEN; needs network)."""
    token = os.environ.get("HF_TOKEN")
    if not token:
        raise FactoryError("--push-to-hub needs a Hugging Face token in the HF_TOKEN environment variable")
    try:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset")
    except Exception as exc:  # network, permissions: one readable line, never the token
        raise FactoryError(
            f"push to {repo} failed: {type(exc).__name__}: {str(exc).replace(token, '***')}"
        ) from None
