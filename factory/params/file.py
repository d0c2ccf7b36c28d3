"""The params.yaml format: what a run sets, every other key a comment at its typed default.

`dvc exp show` has a column for every key of params.yaml, and DVC tracks the keys the stages name. So
the file sets only what a run sets: the protocol keys (``PROTOCOL``, always written: what protocols
vary, and the keys dvc.yaml tracks one by one) and every key whose value differs from its typed
default. Every other key is still in the file, as a comment line ``# key: default`` under its
description: uncomment it, or set it with ``--set key=value`` (``dvc exp run -S ++key=value``: DVC
adds a key the file does not set only with ``++``). A section with nothing set is written ``name: {}``
(an empty mapping, which `dvc exp show` shows as no column; a bare ``name:`` would be a column of
nulls) with its keys commented below it: to set one by hand, delete the ``{}``. The typed defaults
live in ``factory/params/``, which every stage depends on.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from factory.params.config import Params
from factory.params.round_sections import BootstrapParams
from factory.params.vocab import Section

# Always written, set or not: the sizes, seeds, model and labelling choices a protocol varies (what
# `dvc exp show` compares), the keys dvc.yaml's templates read (corpora, bootstrap.*) and the leaves
# stages track one by one. A key a profile sets is written anyway. tests/test_dvc_yaml.py checks
# that every key dvc.yaml names is always in the file.
PROTOCOL: tuple[str, ...] = (
    "corpora",
    "model.base",
    "llm.backend",
    "llm.model",
    "llm.base_urls",
    "index.retriever",
    "index.scope",
    "agent.max_iterations",
    "agent.max_pairs",
    "trajectories.n_questions",
    "trajectories.samples",
    "evaluate.n_questions",
    "backtrace.mode",
    "backtrace.target_mode",
    "counterfactual.max_trajectories",
    "train.budget",
    "train.max_steps",
    "train.learning_rate",
    *(f"bootstrap.{name}" for name in BootstrapParams.model_fields),
)
WIDTH = 100  # comment lines are wrapped to this many characters
# The first line of a file `factory params --profile NAME` writes (factory.params.profiles), kept when
# `factory params --params FILE --output FILE` re-writes it: how a message names the profile in use.
PROFILE_LINE = re.compile(r"^# TraceFactory parameters: the ([\w-]+) profile\b")


def profile_of(path: str | Path | None) -> str | None:
    """The profile a params file was written from (its first line says), None when it does not say."""
    try:
        with open(path or "", encoding="utf-8") as f:
            match = PROFILE_LINE.match(f.readline())
    except (OSError, UnicodeDecodeError):
        return None
    return match.group(1) if match else None


def flat(data: dict, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value of the typed params' nesting (sections opened, other mappings kept whole)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, BaseModel):
            out.update(flat(dict(value), f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def changed_keys(params: Params, defaults: Params | None = None) -> list[str]:
    """The dotted keys whose values differ from the typed defaults, in the order of the typed params."""
    mine, typed = flat(dict(params)), flat(dict(defaults or Params()))
    return [key for key in mine if plain(mine[key]) != plain(typed[key])]


def render_params_file(
    params: Params,
    header: Iterable[str],
    notes: dict[str, str] | None = None,
) -> str:
    """params.yaml for ``params``: ``header`` lines (comments), then every section with the protocol keys
    and the changed keys set and every other key commented at its default. ``notes`` (dotted key ->
    text) adds a comment line above a key, e.g. why a profile sets it."""
    active = set(PROTOCOL) | set(changed_keys(params))
    out = [f"# {line}" if line else "#" for line in header]
    _emit(params, "", 0, active, notes or {}, out)
    return "\n".join(out) + "\n"


def _emit(
    model: BaseModel, prefix: str, indent: int, active: set, notes: dict, out: list[str], quiet: bool = False
) -> None:
    """The fields of ``model``; ``quiet``: inside a section written ``{}``, every line is a comment."""
    pad = "  " * indent
    for name, field in type(model).model_fields.items():
        key, value = prefix + name, getattr(model, name)
        out.extend(f"{pad}# {line}" for line in textwrap.wrap(field.description or "", WIDTH - len(pad)))
        if key in notes:
            out.extend(f"{pad}# {line}" for line in textwrap.wrap(notes[key], WIDTH - len(pad)))
        if isinstance(value, Section):
            empty = quiet or not any(k.startswith(key + ".") for k in active)
            out.append(f"{pad}# {name}:" if quiet else f"{pad}{name}: {{}}" if empty else f"{pad}{name}:")
            _emit(value, key + ".", indent + 1, active, notes, out, quiet=empty)
            continue
        style = None if isinstance(value, (list, dict)) else False  # leaf lists inline, scalars as key: value
        dumped = yaml.safe_dump({name: plain(value)}, sort_keys=False, default_flow_style=style, width=1000)
        mark = "# " if quiet or key not in active else ""
        out.extend(f"{pad}{mark}{line}" for line in dumped.rstrip().splitlines())


def plain(value: Any) -> Any:
    """``value`` with every pydantic model in it dumped to JSON-able data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
