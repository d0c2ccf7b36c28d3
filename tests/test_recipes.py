"""docs/development.md's recipes stay true: "Adding a variant" and "Adding a corpus" name files that
exist, and those files are the ones the registries read."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
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
    # the registry's objects live in registry.py, and every rule they hold is a function of kept.py
    assert source(registry.Variant) == "factory/variants/registry.py"
    assert {source(v.rule) for v in registry.REGISTRY.values()} == {"factory/variants/kept.py"}
    assert {v.rule.__module__ for v in registry.REGISTRY.values()} == {kept.__name__}
    assert source(registry.select_units) == "factory/variants/registry.py"


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


def tracked_copy(tmp_path: Path) -> Path:
    """The git-tracked files of the checkout (as they are on disk) copied to ``tmp_path/repo``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    copy = tmp_path / "repo"
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    return copy


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def run_tests(copy: Path, tests: list[str]) -> subprocess.CompletedProcess:
    from tests.conftest import CORPORA  # the copy sits elsewhere: the same shared corpora

    env = {
        **os.environ,
        "PYTHONPATH": str(copy),
        "PYTHONDONTWRITEBYTECODE": "1",
        "FACTORY_CORPORA": str(CORPORA),
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    return subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=300)


FIFTH_RULE = """

def keep_first_triplet(trajectory: Mapping, labels_row: Mapping | None, seed: int) -> Selection:
    pairs, triplets = all_units(trajectory)
    return _kept(trajectory, pairs, triplets, set(), set(triplets[:1]))
"""
FIFTH_VARIANT = """FIRST_TRIPLET = Variant(
    name="first_triplet",
    rule=keep_first_triplet,
    needs_labels=False,
    card="Only the first triplet of each trajectory.",
    label="first triplet",
    question="Does backtracing beat keeping the first triplet?",
)

"""


def test_adding_a_variant_by_the_recipe_touches_two_files_and_the_named_tests_pass(tmp_path):
    """ "Adding a variant" followed to the letter in a copy: its rule in kept.py, its object in
    registry.py; the tests the recipe names and the docs check pass, and nothing else changed."""
    section = recipe("Adding a variant")
    named_tests = [f for f in named_files(section) if f.startswith("tests/") and f != "tests/test_recipes.py"]
    assert named_tests == ["tests/test_docs.py", "tests/variants/test_registry.py"]
    copy = tracked_copy(tmp_path)
    before = snapshot(copy)
    kept_py, registry_py = copy / "factory/variants/kept.py", copy / "factory/variants/registry.py"
    kept_py.write_text(kept_py.read_text() + FIFTH_RULE)
    text = registry_py.read_text().replace(
        "    keep_authors_rule,\n", "    keep_authors_rule,\n    keep_first_triplet,\n"
    )
    anchor = "# The reference every other variant"
    text = text.replace(anchor, FIFTH_VARIANT + anchor)
    text = text.replace("UNFILTERED, AUTHORS_RULE)}", "UNFILTERED, AUTHORS_RULE, FIRST_TRIPLET)}")
    registry_py.write_text(text)
    result = run_tests(copy, named_tests)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    changed = sorted(k for k, v in snapshot(copy).items() if before.get(k) != v)
    assert changed == ["factory/variants/kept.py", "factory/variants/registry.py"]
    # the copy's registry does have the fifth variant, and the full profile does not take it silently
    probe = "from factory.variants import registry; from factory.params.profiles import profile_params; "
    probe += "print(registry.NAMES[-1], profile_params('full').bootstrap.variants)"
    env = {**os.environ, "PYTHONPATH": str(copy)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=copy, env=env, capture_output=True, text=True)
    assert (
        out.stdout.split(" ", 1)[0] == "first_triplet" and "first_triplet" not in out.stdout.split(" ", 1)[1]
    )


def test_adding_a_corpus_by_the_recipe_touches_two_files_and_the_named_tests_pass(tmp_path):
    """ "Adding a corpus" followed to the letter in a copy: the dataset's module (Toy Trails, the test
    corpus) and its line in CORPORA; the tests the recipe names pass there, nothing else changed, and the
    copy's `factory ingest` reads the new corpus from files given with --set (anywhere on disk)."""
    section = recipe("Adding a corpus")
    named_tests = [f for f in named_files(section) if f.startswith("tests/") and f != "tests/test_recipes.py"]
    assert "tests/test_docs.py" in named_tests and "tests/test_config.py" in named_tests
    copy = tracked_copy(tmp_path)
    before = snapshot(copy)
    module = copy / "factory/corpora/toytrails.py"
    module.write_text((ROOT / "tests/corpora/toy_corpus.py").read_text())
    registry_py = copy / "factory/corpora/__init__.py"
    text = registry_py.read_text()
    anchor = '    "musique": "factory.corpora.musique",\n'
    assert anchor in text
    registry_py.write_text(text.replace(anchor, anchor + '    "toytrails": "factory.corpora.toytrails",\n'))
    result = run_tests(copy, [t for t in named_tests if "toy" not in t])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    changed = sorted(k for k, v in snapshot(copy).items() if before.get(k) != v)
    assert changed == ["factory/corpora/__init__.py", "factory/corpora/toytrails.py"]

    from tests.corpora.test_a_fourth_corpus import trail  # the same records, read by the copy's code

    project, data = tmp_path / "project", tmp_path / "elsewhere" / "trails.jsonl"
    project.mkdir()
    data.parent.mkdir()
    data.write_text("".join(json.dumps(trail(i)) + "\n" for i in range(10)))
    sets = ["--set", f"corpora={{toytrails: [{data}]}}", "--set", f"splits.official={{{data}: train}}"]
    env = {**os.environ, "PYTHONPATH": str(copy), "FACTORY_NO_PROGRESS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "factory.cli", "ingest", *sets],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    ingest = json.loads((project / "metrics/ingest.json").read_text())["datasets"]["toytrails"]
    assert (ingest["read"], ingest["ingested"]) == (10, 10)
