"""The params sections of the agent's runs: the LLM backend, the agent, trajectories, execution,
evaluation."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from factory.params.vocab import (
    DEFAULT_CORPORA,
    ConstraintField,
    Dataset,
    Section,
)


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
    dtype: Literal["auto", "bfloat16", "float32", "float16", "int8"] = Field(
        "auto",
        description="local backend precision; 'auto' = bf16 on CUDA and on CPUs with native bf16 "
        "(AMX/AVX512-BF16), else "
        "fp32. fp32 on CPU is batch-invariant (a request's text never depends on its batch-mates). "
        "'int8': on the CPU the linear layers' weights in int8, activations quantized per call "
        "(torch's dynamic quantization, any adapter merged first): decoding reads a quarter of fp32's "
        "bytes per token; the text differs from fp32's (factory.llm.quantize). On a GPU, int8 runs as auto.",
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
        default_factory=lambda: list(DEFAULT_CORPORA),
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
