"""The registries' names a command's params give, checked when the command loads them.

The params room imports no registry (``factory.params``: a leaf), so it types a key that holds a dataset
or a supervision variant as ``NameOf(kind)`` and leaves the check to this module, one floor up: the CLI
runs it on the params of every command, so that a misspelt name stops before any work, naming its key
and the registered names. Where a name is looked up it is checked again (``factory.corpora.corpus``,
``factory.variants.registry.variant``): a notebook calling the library without the CLI gets the same
message when the name is first used.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from factory.corpora import UnknownCorpus, names
from factory.params.config import Params
from factory.params.vocab import NameOf
from factory.utils.errors import FactoryError
from factory.variants.registry import NAMES as VARIANTS
from factory.variants.registry import UnknownVariant


def check_names(params: Params) -> Params:
    """``params`` when every dataset and variant it names is registered; else a ``FactoryError`` listing
    each unknown one by its key (e.g. ``bootstrap.variants.1``) with the names there are."""
    problems = [_problem(key, kind, name) for key, kind, name in named(params)]
    problems = [p for p in problems if p]
    if problems:
        raise FactoryError("invalid parameters:\n  " + "\n  ".join(problems))
    return params


def _problem(key: str, kind: str, name: Any) -> str:
    if kind == "dataset":
        return "" if name in names() else str(UnknownCorpus(name, key))
    return "" if name in VARIANTS else f"{key}: {UnknownVariant(name)}"


def named(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, str, Any]]:
    """(key, kind, name) for every value of ``model`` at a key typed ``NameOf(kind)``, a mapping's keys
    included (``corpora.hotpotqa``)."""
    for field_name, field in type(model).model_fields.items():
        key = prefix + field_name
        yield from _names_at(field.annotation, tuple(field.metadata), getattr(model, field_name), key)


def _names_at(annotation: Any, metadata: tuple, value: Any, key: str) -> Iterator[tuple[str, str, Any]]:
    marker = next((m for m in metadata if isinstance(m, NameOf)), None)
    origin, args = get_origin(annotation), get_args(annotation)
    if marker is not None:
        yield key, marker.kind, value
    elif isinstance(value, BaseModel):
        yield from named(value, key + ".")
    elif origin is Annotated:
        yield from _names_at(args[0], args[1:], value, key)
    elif origin is list and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _names_at(args[0], (), item, f"{key}.{i}")
    elif origin is dict and isinstance(value, dict):
        for name, item in value.items():
            yield from _names_at(args[0], (), name, f"{key}.{name}")
            yield from _names_at(args[1], (), item, f"{key}.{name}")
    elif origin in (Union, UnionType) and value is not None:
        for arg in args:
            yield from _names_at(arg, (), value, key)
