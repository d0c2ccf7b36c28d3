"""docs/development.md's recipes stay true: "Adding a variant" and "Adding a corpus" name files that
exist, and those files are the ones the registries read."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from tests.conftest import ROOT

DEVELOPMENT = ROOT / "docs" / "development.md"
PATH = re.compile(r"`((?:factory|tests)/[\w/<>.-]+\.py)")


def recipe(title: str) -> str:
    """The text of the section ``## <title>`` of docs/development.md (to the next ``## ``)."""
    text = DEVELOPMENT.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def named_files(section: str) -> list[str]:
    return sorted(set(PATH.findall(section)))


def source(obj) -> str:
    return str(Path(inspect.getsourcefile(obj)).resolve().relative_to(ROOT))


def test_adding_a_variant_names_the_files_the_registry_reads():
    from factory.variants import kept, registry

    files = [f for f in named_files(recipe("Adding a variant")) if f.startswith("factory/")]
    assert files == ["factory/variants/kept.py", "factory/variants/registry.py"]
    assert all((ROOT / f).is_file() for f in files)
    # the registry's objects live in registry.py, and every rule they name is a function of kept.py
    assert source(registry.Variant) == "factory/variants/registry.py"
    assert {source(kept.RULES[v.rule]) for v in registry.REGISTRY.values()} == {"factory/variants/kept.py"}
    assert source(kept.kept_units) == "factory/variants/kept.py"


def test_adding_a_corpus_names_the_files_the_registry_reads():
    import factory.corpora as corpora
    from factory.corpora.corpus import Corpus

    section = recipe("Adding a corpus")
    files = named_files(section)
    concrete = [f for f in files if "<" not in f]
    assert all((ROOT / f).is_file() for f in concrete), concrete
    assert source(Corpus) == "factory/corpora/corpus.py" and "factory/corpora/corpus.py" in files
    assert source(corpora.corpus) == "factory/corpora/__init__.py" and "factory/corpora/__init__.py" in files
    assert "factory/corpora/<name>.py" in files
    # every registered corpus is one module factory/corpora/<module>.py defining its CORPUS
    for name in corpora.names():
        c = corpora.corpus(name)
        assert isinstance(c, Corpus) and c.name == name
        module = corpora.CORPORA[name]
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file()
    assert "tests/corpora/test_a_fourth_corpus.py" in files
