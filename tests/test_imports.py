"""The package's import rules: a stage imports only the library, and no module imports itself back."""

from __future__ import annotations

import networkx as nx

from tests.imports import ROOT, imports_of, module_file, module_name, project_modules

STAGES = ROOT / "factory" / "stages"


def test_no_stage_module_imports_another_stage_module():
    offending = {}
    for path in sorted(STAGES.glob("s*.py")):
        others = sorted(n for n in imports_of(path) if n.startswith("factory.stages.s"))
        if others:
            offending[path.name] = others
    assert not offending, f"a stage is a thin run(params) over the library; share code there: {offending}"


def test_no_import_circles():
    graph = nx.DiGraph()
    for path in project_modules():
        graph.add_node(module_name(path))
        graph.add_edges_from((module_name(path), name) for name in imports_of(path))
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    cycles += [[n] for n in graph if graph.has_edge(n, n)]
    assert not cycles, f"modules that import each other (directly or around a loop): {cycles}"


def room(name: str) -> str | None:
    """The library folder (room) of a module: factory.<room>.<module> (the package's top-level modules
    and the stages are in no room)."""
    parts = name.split(".")
    if parts[0] != "factory" or len(parts) < 3 or parts[1] == "stages":
        return None
    return parts[1]


def test_the_rooms_import_one_way():
    """No two library folders import each other, and no loop runs through several: the rooms have an
    order (corpora before retrieval before agent ... before bootstrap) that every import follows."""
    graph = nx.DiGraph()
    for path in project_modules():
        here = room(module_name(path))
        for name in imports_of(path):
            there = room(name)
            if here and there and here != there:
                graph.add_edge(here, there)
    both = sorted((a, b) for a, b in graph.edges if a < b and graph.has_edge(b, a))
    assert not both, f"rooms that import each other: {both}"
    loops = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not loops, f"rooms on an import loop: {loops}"
    assert not graph.has_edge("causal", "variants")  # the causal check runs before the sets are built


def test_the_import_reader_sees_lazy_and_from_imports():
    # the checks above are only as good as the reader: a function-level import and `from pkg import module`
    loop = imports_of(module_file("factory.agent.loop"))
    assert "factory.agent.grounding" in loop  # imported inside a function
    stage = imports_of(module_file("factory.stages.s06_backtrace"))
    assert "factory.utils.paths" in stage  # from factory.utils import paths


def test_the_import_reader_sees_the_corpora_the_registry_imports_by_name():
    # corpus(name) imports a dataset module by its name in CORPORA: a caller of corpus imports them all
    gold = imports_of(module_file("factory.corpora.gold"))
    assert {"factory.corpora.hotpotqa", "factory.corpora.twowiki", "factory.corpora.musique"} <= gold
    assert "factory.corpora.hotpotqa" not in imports_of(module_file("factory.config"))  # names() only
