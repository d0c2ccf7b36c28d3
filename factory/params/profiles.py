"""Named parameter profiles: the demo, a one-GPU pilot, the full protocol and a hosted API's model.

A profile is the typed defaults (factory/params/) plus the keys it sets, each with the reason it
sets it. ``factory params --profile NAME`` prints the params file it gives (``--output params.yaml``
writes it, ``--cost`` prints its LLM calls, ``--explain`` its settings as a table); the committed
params.yaml is the demo's. Because a profile starts from the typed defaults, nothing the demo shrinks
for a CPU reaches another profile (tests/test_profiles.py checks it key by key). A profile that runs
on the openai backend needs the servers and the served name (``llm.base_urls``, ``llm.model``), and
for the stages that load weights (prepare-model, train) the weights (``model.base``): the user's own,
given with ``--set``; a stage started without them stops when its params load
(``factory.params.served.require_served_model``). The hosted profile runs no stage that loads weights.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

import yaml

from factory.params.config import Params, validate_params
from factory.params.file import flat, plain, render_params_file
from factory.utils.errors import FactoryError


@dataclass(frozen=True)
class Setting:
    value: Any
    why: str


@dataclass(frozen=True)
class Profile:
    name: str
    summary: str
    settings: dict[str, Setting] = field(default_factory=dict)


SERVED = Setting(
    "openai",
    "a real model behind OpenAI-compatible servers (vLLM): the embedded 135M model is not a reasoner. "
    "Give llm.base_urls, llm.model and model.base with --set.",
)

HOSTED = Setting(
    "openai",
    "a hosted OpenAI-compatible API (OpenAI, a provider, a colleague's vLLM) with no weights on disk: give "
    "llm.base_urls and llm.model with --set, the API key in the environment variable llm.api_key_env "
    "names (never in params). No stage this profile runs loads weights, so model.base is not needed; "
    "prepare-model and train stop and ask for it.",
)

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            "demo",
            "every stage on 2 CPU cores with the embedded 135M model, in under 20 minutes (`make demo`); "
            "its numbers show the machinery, not evidence.",
            {
                "retrieval.top_n": Setting(2, "two passages per entity-relation pair: shorter prompts"),
                "llm.max_new_tokens": Setting(
                    64, "the 135M model's constrained replies fit in 64 tokens; a CPU decodes them one by one"
                ),
                "llm.batch_size": Setting(
                    32, "a whole lockstep shard (trajectories.shard_size 32) generates as one batch"
                ),
                "bootstrap.rounds": Setting(
                    [{"round": 0, "after": "init"}, {"round": 1, "after": "round_0"}],
                    "a slot per round the demo runs (bootstrap.max_rounds 2), not a third that would record "
                    "'skipped': a slot is 8 DVC stages per chain, each costing seconds of DVC's own work (it "
                    "rewrites dvc.lock after every stage). One more round: docs/pipeline.md",
                ),
                "llm.dtype": Setting(
                    "int8",
                    "int8 weights (factory.llm.quantize): a CPU decodes as fast as it reads weights, and "
                    "int8 reads a quarter of fp32's bytes (half of bf16's); 2x fp32's speed on the demo's "
                    "calls on a 2-core Xeon without bf16 (docs/benchmarks.md); replies differ from fp32's",
                ),
                "agent.max_iterations": Setting(
                    2, "with agent.max_pairs 2: at most 14 LLM calls a trajectory instead of 42"
                ),
                "agent.max_pairs": Setting(2, "see agent.max_iterations"),
                "agent.passage_chars": Setting(300, "passages cut to 300 characters: short prompts"),
                "trajectories.n_questions": Setting(
                    12,
                    "12 training questions a round, from official train: the 135M model answers none, and "
                    "with the shared samples' train files even the rationalization hint gave no correct "
                    "trajectory at 12 or 16 (16 costs a minute more), so the demo's sets stay empty; 24 "
                    "gave one",
                ),
                "trajectories.allow_fewer": Setting(True, "see evaluate.allow_fewer"),
                "trajectories.rationalize": Setting(
                    True,
                    "the 135M model answers none of a round's questions on its own; STaR rationalization "
                    "(the gold answer as a hint, never shown in supervision) gives each round correct "
                    "trajectories to label, train on and re-ask",
                ),
                "evaluate.n_questions": Setting(
                    4,
                    "4 held-out and 4 test questions: the base model and every round of every chain are "
                    "evaluated; at this size one question is 25 EM points, no evidence",
                ),
                "evaluate.allow_fewer": Setting(
                    True,
                    "the demo shows the machinery on whatever corpora it is given (the shared samples, a "
                    "corpus cut with ingest.max_per_dataset): a split with fewer questions than asked is "
                    "sampled whole and reports/bootstrap.md says so, where the pilot and full profiles stop",
                ),
                "counterfactual.max_trajectories": Setting(
                    8, "at most 8 correct trajectories of a round re-asked (7 graphs each)"
                ),
                "train.max_steps": Setting(
                    2, "two LoRA steps a round: training runs end to end in seconds; no learning is expected"
                ),
                "train.batch_size": Setting(4, "with train.max_steps: two steps of 4 examples"),
                "routes.n_questions": Setting(
                    4,
                    "4 questions a dataset for the route classifier: the breakdown exists, its accuracy "
                    "is no evidence",
                ),
            },
        ),
        Profile(
            "pilot",
            "the full protocol's shape on one GPU serving the model (vLLM): one seed, 100 training "
            "questions x 4 samples a round, 100 held-out and 100 test questions; checks the serving, the "
            "costs and the reports before the full run.",
            {
                "llm.backend": SERVED,
                "trajectories.n_questions": Setting(100, "100 training questions a round"),
                "trajectories.samples": Setting(4, "4 trajectories per question, as in the full protocol"),
                "evaluate.n_questions": Setting(100, "100 held-out and 100 test questions"),
                "train.max_steps": Setting(
                    100, "100 optimizer steps of 8 examples a round for every variant (equal compute)"
                ),
            },
        ),
        Profile(
            "full",
            "the protocol a paper runs: 3 seeds, 3 rounds of 1,000 training questions x 4 samples, 500 "
            "held-out and 500 test questions, the paired stop test, equal optimizer steps per variant, "
            "on the full corpora (docs/corpora.md) and a served model.",
            {
                "llm.backend": SERVED,
                "trajectories.n_questions": Setting(1000, "1,000 training questions a round"),
                "trajectories.samples": Setting(
                    4, "4 trajectories per question: 4,000 a round, before backtracing selects"
                ),
                "evaluate.n_questions": Setting(
                    500,
                    "500 held-out and 500 test questions: the paired stop rule and the report's CIs see "
                    "differences of a few EM points",
                ),
                "train.max_steps": Setting(
                    500, "500 optimizer steps of 8 examples a round for every variant (equal compute)"
                ),
                "bootstrap.max_rounds": Setting(
                    3, "up to three rounds per chain; the held-out stop rule may end a chain sooner"
                ),
                "bootstrap.seeds": Setting([0, 1, 2], "three repeats of the whole protocol: mean ± std"),
                # written out: a variant joins the paper protocol when someone writes it here
                "bootstrap.variants": Setting(
                    ["backtrace", "random", "unfiltered", "authors_rule"],
                    "the three sets and the KnowTrace authors' rule: the report asks whether our labelling "
                    "beats theirs in training, at equal compute",
                ),
            },
        ),
        Profile(
            "hosted",
            "generation, backtracing, the variants, the labels against gold, the causal check and "
            "publishing on a hosted API's model (no weights on disk, no training): round 0 of every chain, "
            "100 training questions x 4 samples, published with `factory publish --round 0` "
            "(docs/full-scale.md#a-hosted-api-no-weights-no-training).",
            {
                "llm.backend": HOSTED,
                "trajectories.n_questions": Setting(100, "100 training questions a round, as the pilot"),
                "trajectories.samples": Setting(4, "4 trajectories per question, as in the full protocol"),
                "evaluate.n_questions": Setting(
                    100,
                    "100 held-out questions: the API model's held-out EM, which each chain's start "
                    "decision reads; no round is trained, so no round is evaluated or selected after it",
                ),
                "bootstrap.max_rounds": Setting(
                    1,
                    "round 0 only: the API's model generates it and nothing is trained (there are no "
                    "weights to train), so `factory params --cost` counts one round",
                ),
            },
        ),
    )
}


def profile(name: str) -> Profile:
    if name not in PROFILES:
        raise FactoryError(
            f"no profile {name!r}: the profiles are {', '.join(PROFILES)} (factory/params/profiles.py)"
        )
    return PROFILES[name]


def profile_params(name: str, sets: list[str] | None = None) -> Params:
    """The typed defaults, the profile's settings, then ``--set`` overrides: validated."""
    data: dict[str, Any] = {}
    for key, setting in profile(name).settings.items():
        *parents, last = key.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = setting.value
    return validate_params(data, sets)


HEADER = (
    "A key written out is set by this run; a commented key is at its typed default (factory/params/):",
    "uncomment it, or set it with `factory <stage> --set key=value` / `dvc exp run -S ++key=value`.",
    "A section at its defaults is written `name: {}`: to set a key under it by hand, delete the `{}`.",
)


def render_profile(name: str, params: Params) -> str:
    """The params file of profile ``name`` (``params`` = ``profile_params(name, sets)``), each key the
    profile sets annotated with why."""
    p = profile(name)
    defaults = flat(dict(Params()))
    notes = {
        key: f"{name} profile (typed default {_yaml(defaults[key])}): {s.why}"
        for key, s in p.settings.items()
    }
    header = (
        f"TraceFactory parameters: the {name} profile, written by `factory params --profile {name}`.",
        *_wrap(p.summary),
        *HEADER,
        "The profiles and what each sets: docs/pipeline.md#profiles.",
    )
    return render_params_file(params, header, notes)


def render_current(params: Params, started_from: str | None = None) -> str:
    """The params file of ``params`` as loaded (params.yaml and --set), without a profile's notes;
    ``started_from``: the profile the loaded file was written from, kept in the first line."""
    first = (
        f"TraceFactory parameters: the {started_from} profile, re-written by `factory params` from a params "
        "file and --set."
        if started_from
        else "TraceFactory parameters, written by `factory params` from params.yaml and --set."
    )
    header = (first, *HEADER)
    return render_params_file(params, header)


def explain(name: str) -> str:
    """A markdown table of what profile ``name`` sets: key, value, typed default, why."""
    defaults = flat(dict(Params()))
    rows = [
        f"| `{key}` | {_yaml(s.value)} | {_yaml(defaults[key])} | {s.why} |"
        for key, s in profile(name).settings.items()
    ]
    return (
        "\n".join(["| key | " + name + " | typed default | why |", "| --- | --- | --- | --- |", *rows]) + "\n"
    )


def _yaml(value: Any) -> str:
    return (
        yaml.safe_dump(plain(value), default_flow_style=True, width=1000)
        .strip()
        .removesuffix("\n...")
        .strip()
    )


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, 96)
