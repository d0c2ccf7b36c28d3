"""Typed parameters of every stage, loaded from ``params.yaml`` plus ``--set dotted.key=value``.

``Params`` gathers the sections (``factory.params.*_sections``), each default written there once with its
documentation. params.yaml sets what a run changes and shows every other key as a comment at its
default (``factory.params.file``; ``factory params`` renders it, ``factory params --profile NAME`` a
named profile's, ``factory.params.profiles``). Unknown keys are errors: a typo in ``--set`` or
``dvc exp run -S`` fails loudly instead of being ignored.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from factory.params.agent_sections import (
    AgentParams,
    EvaluateParams,
    ExecutionParams,
    LLMParams,
    TrajectoryParams,
)
from factory.params.data_sections import (
    DecontaminationParams,
    IndexParams,
    IngestParams,
    ModelParams,
    RetrievalParams,
    SplitParams,
)
from factory.params.label_sections import (
    BacktraceParams,
    CalibrationParams,
    CounterfactualParams,
    GroundingParams,
    RelevanceParams,
    ReportParams,
    SimulateParams,
    VariantParams,
)
from factory.params.round_sections import (
    BootstrapParams,
    PublishParams,
    RoutesParams,
    TraceParams,
    TrainParams,
)
from factory.params.vocab import DEFAULT_CORPORA, Dataset, Section
from factory.utils.errors import FactoryError


def section(params_class: type[Section], description: str) -> Any:
    """A section of ``Params``: its defaults from its own class, described once."""
    return Field(default_factory=params_class, description=description)


class Params(Section):
    corpora: dict[Dataset, list[str]] = Field(
        default_factory=lambda: {name: list(files) for name, files in DEFAULT_CORPORA.items()},
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
        return "no such key (factory/params/ lists the keys)"
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
    mean every key at its default, like ``ingest: {}`` (factory.params.file)."""
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
