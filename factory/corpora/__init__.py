"""The corpora: one module per dataset, each defining its ``CORPUS`` (``factory.corpora.corpus.Corpus``),
and ``CORPORA``, the only list of them.

Everything outside this folder asks ``corpus(name)`` what it needs of a dataset (its builder, record
type, gold annotation, licence, hub layout) and ``names()`` which datasets there are; the CLI checks
the params' dataset names against ``names()`` (``factory.names``). The modules are imported when first
asked for, so that the check imports no builder (msgspec, pyarrow). Reading the
configured sources into Question rows is ``factory.corpora.ingest``.
"""

from __future__ import annotations

import importlib

from factory.corpora.corpus import Corpus
from factory.utils.errors import FactoryError

# Dataset id -> the module that defines its CORPUS. A new corpus is one module and one line here
# (docs/development.md#adding-a-corpus).
CORPORA: dict[str, str] = {
    "hotpotqa": "factory.corpora.hotpotqa",
    "2wikimultihopqa": "factory.corpora.twowiki",
    "musique": "factory.corpora.musique",
}
ADDING = "docs/development.md#adding-a-corpus"


class UnknownCorpus(FactoryError):
    """A dataset name no module of ``CORPORA`` defines."""

    def __init__(self, name: object, where: str = ""):
        self.name = name
        at = f"{where}: " if where else ""
        super().__init__(
            f"{at}unknown dataset {name!r}: the corpora are {', '.join(names())} (CORPORA in "
            "factory/corpora/__init__.py). Use one of those names; a new corpus is one module defining "
            f"its CORPUS and one line in CORPORA ({ADDING})"
        )


def names() -> tuple[str, ...]:
    """The dataset ids, in registry order (the default order of the params' dataset lists)."""
    return tuple(CORPORA)


def corpus(name: str, where: str = "") -> Corpus:
    """The ``Corpus`` of dataset ``name`` (its module imported on first use); ``UnknownCorpus`` for a name
    the registry lacks (``where``: what named it, for the message)."""
    module_name = CORPORA.get(name) if isinstance(name, str) else None
    if module_name is None:
        raise UnknownCorpus(name, where)
    found = getattr(importlib.import_module(module_name), "CORPUS", None)
    if not isinstance(found, Corpus) or found.name != name:
        has = f"a CORPUS named {found.name!r}" if isinstance(found, Corpus) else "no CORPUS of type Corpus"
        raise FactoryError(
            f"{module_name} is registered as corpus {name!r} in CORPORA (factory/corpora/__init__.py) but "
            f"has {has}: give the module a module-level CORPUS = Corpus(name={name!r}, ...) ({ADDING})"
        )
    return found
