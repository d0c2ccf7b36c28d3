"""The vocabularies of the params and their base class, one definition each.

The params room imports nothing of the factory but its utilities: a key that holds a registry's name (a
dataset, a supervision variant) is marked ``NameOf(kind)`` here and checked against its registry by
``factory.names`` when a command loads its params, and again where the name is looked up
(``factory.corpora.corpus``, ``factory.variants.registry.variant``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True)
class NameOf:
    """Marks a key whose value is a name of a registry: 'dataset' (factory/corpora/__init__.py's
    CORPORA) or 'variant' (factory/variants/registry.py)."""

    kind: Literal["dataset", "variant"]


# A dataset: a name of factory.corpora's registry (CORPORA), the one list of the corpora.
Dataset = Annotated[str, NameOf("dataset")]
# A supervision variant: a name registered in factory/variants/registry.py.
Variant = Annotated[str, NameOf("variant")]
# The corpus files a run reads by default, per dataset (its keys: the datasets trajectories draw from).
DEFAULT_CORPORA: dict[str, list[str]] = {
    "hotpotqa": [
        "../shared/corpora/hotpotqa/dev_sample.json",
        "../shared/corpora/hotpotqa/train_sample.json",
    ],
    "2wikimultihopqa": ["../shared/corpora/2wikimultihopqa/dev_sample.json"],
    "musique": [
        "../shared/corpora/musique/dev_sample.jsonl",
        "../shared/corpora/musique/train_sample.jsonl",
    ],
}
# A bad value of the vocabularies below fails when params load, naming the key.
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
