"""Publish each variant's final supervision set as a Hugging Face dataset folder.

The final set of a chain (a variant under one protocol seed) is the data that trained its selected
policy: the union of the examples of rounds 0..selected (by example id; with ``variants.accumulate``
that is the selected round's accumulated set). A chain whose base model stayed best publishes round
0's set, and its card says so. Every protocol seed is published, as one dataset config
(``seed_<s>``) each, parquet shards under ``data/seed_<s>/``; the dataset card (README.md with a
YAML header) states the licenses inherited from the sources, the source datasets, the generating
model and adapters, the selected round of every seed, the prompt version, the parameters, counts,
the FA ratio and the relevance-label scores (its markup: templates/card.md.j2). It loads with
``datasets.load_dataset(<folder>, "seed_0")``: the header's ``dataset_info`` and each config's data
fingerprint (``data_fingerprint``) are what keeps ``datasets``' cache of one published folder from being
served for another (see ``_header``). ``push_to_hub`` uploads a folder with
``huggingface_hub`` (token from HF_TOKEN, read from the environment and never written).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from factory.corpora.corpus import Corpus
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import atomic_path
from factory.utils.templates import fixed, render
from factory.variants import registry
from factory.variants.fingerprint import FILE as FINGERPRINT_FILE
from factory.variants.licenses import card_corpora
from factory.variants.provenance import provenance_context
from schemas import SUPERVISION, read_rows, to_table

SHARD_ROWS = 50_000


def final_examples(variant: str, seed: int, selected_round: int) -> tuple[list[dict], list[int]]:
    """Union of a chain's round sets 0..selected (by example id, first occurrence kept; the base model
    selected: round 0's set) and the rounds that ran among them."""
    seen, examples, ran = set(), [], []
    for r in range(max(selected_round, 0) + 1):
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


def _config(chain: dict, datasets: list[str]) -> dict:
    """A config's row and counts: the protocol seed and rounds it comes from, its examples by step kind,
    its trajectories and questions, its examples per dataset (as JSON)."""
    examples = chain["examples"]
    by_kind: dict[str, int] = {}
    for e in examples:
        by_kind[e["step_kind"]] = by_kind.get(e["step_kind"], 0) + 1
    return {
        "seed": chain["seed"],
        "selected_round": chain["selected_round"],
        "rounds": chain["rounds"],
        "examples": len(examples),
        "by_kind": sorted(by_kind.items()),
        "trajectories": len({e["trajectory_id"] for e in examples}),
        "questions": len({e["question_id"] for e in examples}),
        "by_dataset": json.dumps({d: sum(e["dataset"] == d for e in examples) for d in datasets}),
    }


def _pts(cell: dict | None) -> str:
    """An effect as points of accuracy with its CI."""
    if not cell or cell.get("value") is None:
        return "n/a"
    lo, hi = cell.get("ci") or [None, None]
    ci = "" if lo is None else f" [{round(100 * lo)}, {round(100 * hi)}]"
    return f"{round(100 * cell['value'])}{ci}"


def _relevance_results(relevance: dict) -> dict:
    """The card's relevance and causal results, pooled over the run: one row per dataset (its scores and
    both verdicts), or none and the status that says why."""
    verdicts = relevance.get("verdicts") or {}
    causal = relevance.get("causal") or {}
    causal_verdicts = causal.get("verdicts") or {}
    groups = causal.get("groups") or {}
    rows = []
    for d in sorted((set(verdicts) | set(causal_verdicts)) - {"all"}):
        v = verdicts.get(d) or {}
        effects = (groups.get(f"dataset={d}") or {}).get("effects") or {}
        rows.append(
            {
                "dataset": d,
                "scores": [fixed(v.get(k)) for k in ("precision", "recall", "f1", "answer_entity_f1")],
                "scored": bool(v),
                "cannot_tell": v.get("verdict") == "cannot tell",
                "beats": bool(v.get("beats_answer_entity")),
                "reaches": bool(v.get("reaches_bar")),
                "lost": [_pts(effects.get("necessity_sq")), _pts(effects.get("necessity_random"))],
                "causal": (causal_verdicts.get(d) or {}).get("verdict", "not run"),
            }
        )
    bar = f"{(relevance.get('params') or {}).get('bar', 0.8):g}" if rows else None
    return {"status": relevance.get("status"), "bar": bar, "rows": rows}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_fingerprint(folder: str | Path, config: str | None = None) -> str:
    """The identity of a published folder's data (hex sha256): the sha256 of the ``sha256sum`` listing of
    its parquet shards (paths relative to the folder, sorted), all configs' or one config's
    (``seed_<s>``). Anyone can recompute it without this package:
    ``find data -name '*.parquet' | LC_ALL=C sort | xargs sha256sum | sha256sum``."""
    root = Path(folder)
    shards = sorted((root / "data" / (config or "")).rglob("*.parquet"), key=lambda p: p.as_posix())
    listing = "".join(f"{_sha256(s)}  {s.relative_to(root).as_posix()}\n" for s in shards)
    return hashlib.sha256(listing.encode()).hexdigest()


def _dataset_info(chains: list[dict]) -> dict | list:
    """The header's ``dataset_info`` as ``push_to_hub`` writes it (datasets' own serializer): every
    config's features, row count and sizes. ``load_dataset`` takes these as the expected split sizes and
    verifies what it reads against them."""
    from datasets import DatasetInfo, Features, SplitDict, SplitInfo
    from datasets.info import DatasetInfosDict

    infos = DatasetInfosDict()
    for c in chains:
        name = f"seed_{c['seed']}"
        splits = SplitDict()
        splits.add(SplitInfo(name="train", num_bytes=c["num_bytes"], num_examples=len(c["examples"])))
        infos[name] = DatasetInfo(
            config_name=name,
            features=Features.from_arrow_schema(SUPERVISION),
            splits=splits,
            download_size=c["download_size"],
            dataset_size=c["num_bytes"],
        )
    card: dict = {}
    infos.to_dataset_card_data(card)
    return card["dataset_info"]


def _described(fingerprint: str) -> str:
    """A config's ``description``: its data fingerprint (``data_fingerprint`` of its shards alone)."""
    return f"data fingerprint {fingerprint} (sha256 of its shards' sha256sum listing)"


def _header(variant: str, chains: list[dict], corpora: list[Corpus]) -> dict:
    """The card's YAML header (the Hub's dataset metadata): licenses, sources, size, one config a seed.

    ``load_dataset(<folder>, "seed_<s>")`` caches a local folder under
    ``<folder name>/seed_<s>/0.0.0/<hash>``, the hash being datasets' ``LocalDatasetModuleFactory``'s
    hash of this header's ``dataset_info`` and of its configs (their ``data_files`` *patterns*, not the
    files): two folders of the same variant with equal headers would share one cache entry, and the
    second would load the first's rows. So each config's ``description`` (a BuilderConfig field, hashed
    with the config) carries the fingerprint of its shards' bytes, and ``dataset_info`` its sizes."""
    examples = sum(len(c["examples"]) for c in chains)
    loadable = [c for c in chains if c["examples"]]
    return {
        "license": sorted({c.license for c in corpora}) or "other",
        "language": ["en"],
        "pretty_name": f"TraceFactory {variant} supervision set",
        "task_categories": ["question-answering", "text-generation"],
        "tags": ["multi-hop-qa", "rag", "knowtrace", "self-training", "synthetic"],
        "source_datasets": [c.source for c in corpora],
        "size_categories": ["n<1K" if examples < 1000 else "1K<n<10K" if examples < 10_000 else "10K<n<100K"],
        "configs": [
            {
                "config_name": f"seed_{c['seed']}",
                "data_files": [{"split": "train", "path": f"data/seed_{c['seed']}/train-*.parquet"}],
                "description": _described(c["fingerprint"]),
                **({"default": True} if i == 0 else {}),
            }
            for i, c in enumerate(loadable)
        ],
        **({"dataset_info": _dataset_info(loadable)} if loadable else {}),
    }


def _card(variant: str, chains: list[dict], info: dict, data_id: str) -> str:
    """The dataset card (templates/card.md.j2): provenance, configs, counts, relevance results, params."""
    datasets = sorted({e["dataset"] for c in chains for e in c["examples"]}) or sorted(
        info.get("datasets", [])
    )
    corpora = card_corpora(datasets, f"the {variant} set's examples")
    header = _header(variant, chains, corpora)
    licenses = header["license"]
    return render(
        "factory.variants",
        "card.md.j2",
        header=yaml.safe_dump(header, sort_keys=False),
        variant=variant,
        keeps=registry.variant(variant).card,
        policies=info["policies"],
        model=info["model"],
        untrained=info.get("untrained", False),
        prompt_version=info["prompt_version"],
        licenses=", ".join(licenses) if isinstance(licenses, list) else licenses,
        share_alike="; ".join(f"{c.title} is {c.license_name}" for c in corpora if c.share_alike),
        configs=[_config(c, datasets) for c in chains],
        fa_ratio=info["fa_ratio"],
        relevance=_relevance_results(info["relevance"]),
        params=yaml.safe_dump(info["params"], sort_keys=True).rstrip(),
        provenance=provenance_context(info),
        data_fingerprint=data_id,
    )


def publish_variant(variant: str, out_dir: str | Path, info: dict, selected: dict[int, int]) -> dict:
    """Write the dataset folder of a variant, one config per protocol seed (``selected``: seed ->
    that chain's selected round, -1 = the base model); returns its counts."""
    if not selected:
        raise FactoryError(f"nothing to publish for {variant}: no protocol seed given")
    with atomic_path(Path(out_dir)) as out:  # the whole folder at once, with the stage's other outputs
        chains, results = _write_seeds(variant, out, selected)
        policies = sorted({e["policy"] for c in chains for e in c["examples"]})
        card = _card(variant, chains, {**info, "policies": policies}, data_fingerprint(out))
        (out / "README.md").write_text(card, encoding="utf-8")
        if info.get("fingerprint"):  # the run's settings fingerprint (factory.variants.fingerprint)
            (out / FINGERPRINT_FILE).write_text(
                json.dumps(info["fingerprint"], indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
    return {
        "variant": variant,
        "examples": sum(r["examples"] for r in results.values()),
        "seeds": results,
        "path": str(Path(out_dir)),
    }


def _write_seeds(variant: str, out: Path, selected: dict[int, int]) -> tuple[list[dict], dict]:
    """Each seed's config (parquet shards under ``data/seed_<s>``): the chains for the card, the counts."""
    chains, results = [], {}
    for seed, round_ in selected.items():
        examples, ran = final_examples(variant, seed, round_)
        folder = out / "data" / f"seed_{seed}"
        folder.mkdir(parents=True)
        table = to_table(examples, SUPERVISION, "supervision") if examples else SUPERVISION.empty_table()
        # a chain that kept no example gets no shard and no config: datasets refuses a split without rows
        # ("corresponds to no data"), so the card says it is empty instead of offering a config that fails
        shards = -(-table.num_rows // SHARD_ROWS)
        for i in range(shards):
            part = table.slice(i * SHARD_ROWS, SHARD_ROWS)
            pq.write_table(part, folder / f"train-{i:05d}-of-{shards:05d}.parquet", compression="zstd")
        chains.append(
            {
                "seed": seed,
                "selected_round": round_,
                "rounds": ran,
                "examples": examples,
                "fingerprint": data_fingerprint(out, f"seed_{seed}"),
                "num_bytes": table.nbytes,
                "download_size": sum(p.stat().st_size for p in folder.glob("*.parquet")),
            }
        )
        results[str(seed)] = {
            "selected_round": round_,
            "rounds": ran,
            "examples": table.num_rows,
            "shards": shards,
        }
    return chains, results


HF_TOKEN = "HF_TOKEN"


def hub_token() -> str:
    """The Hugging Face token from the environment (never written anywhere), or a clear error."""
    token = os.environ.get(HF_TOKEN)
    if not token:
        raise FactoryError(
            f"--push-to-hub needs a Hugging Face token in the {HF_TOKEN} environment variable "
            "(a write token from https://huggingface.co/settings/tokens); nothing was uploaded"
        )
    return token


def hub_repo(repo_id: str | None, variant: str) -> str:
    """The dataset repo of a variant: ``<publish.repo_id>-<variant>``, or a clear error."""
    if not repo_id or "/" not in repo_id:
        raise FactoryError(
            "--push-to-hub needs publish.repo_id as '<user or org>/<name>' (got "
            f"{repo_id!r}), e.g. --set publish.repo_id=me/tracefactory; nothing was uploaded"
        )
    return f"{repo_id}-{variant}"


def push_to_hub(folder: str | Path, repo: str, token: str, private: bool) -> None:
    """Upload a published folder to the Hub as a dataset repo (private: publish.private); needs network."""
    try:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        api.create_repo(repo, repo_type="dataset", exist_ok=True, private=private)
        api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset")
    except Exception as exc:  # network, permissions: one readable line, never the token
        raise FactoryError(
            f"push to {repo} failed: {type(exc).__name__}: {str(exc).replace(token, '***')}"
        ) from None
