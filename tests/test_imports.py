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
    """The room of a module: its folder under factory/ (factory.<room>.<module>), a top-level module of the
    package by itself (factory.cli: 'cli'), and the top-level packages validators/, schemas/ and bench/
    each one room. The stages are no room: each is a thin run() over the rooms, checked above."""
    parts = name.split(".")
    if parts[0] != "factory":
        return parts[0]
    if len(parts) < 2 or parts[1] == "stages":
        return None
    return parts[1]


# The one import allowed to run back up: the tasks of backtracing check their labels with the gate
# validators/ keeps for the stage (validators also reads the backtrace's rows). Every other import
# follows one order of the rooms.
BACK_UP = {("backtrace", "validators")}


def room_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in project_modules():
        here = room(module_name(path))
        for name in imports_of(path):
            there = room(name)
            if here and there and here != there:
                graph.add_edge(here, there)
    return graph


def test_the_rooms_import_one_way():
    """The rooms have an order (utils, then params, schemas, corpora ... up to bootstrap and the CLI) that
    every import follows but the one of BACK_UP: without it the room graph has no loop, no two rooms
    importing each other directly or around a circle (no strongly connected component of two or more
    rooms). An import "runs back up" when it goes against that order: then there is none but BACK_UP."""
    graph = room_graph()
    assert "cli" in graph and "validators" in graph and "params" in graph  # top-level modules count
    graph.remove_edges_from(BACK_UP)
    loops = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not loops, f"rooms that import each other (directly or around a loop): {loops}"
    assert not graph.has_edge("causal", "variants")  # the causal check runs before the sets are built


def test_the_params_room_is_on_the_ground_floor():
    """factory/params/ (config, sections, profiles, the params file) imports nothing of the package but
    factory.utils: every other room imports it, and the names it holds (datasets, variants) are checked
    against their registries above it (factory.names), not by importing them."""
    allowed = ("factory.params", "factory.utils")
    offending = {}
    for path in sorted((ROOT / "factory" / "params").glob("*.py")):
        above = sorted(n for n in imports_of(path) if not n.startswith(allowed))
        if above:
            offending[path.name] = above
    assert not offending, f"the params room imports a room above it: {offending}"


def test_a_room_that_imports_the_params_room_back_would_fail():
    # the check is only as good as its graph: a tie like config <-> corpora is a loop of two rooms
    graph = room_graph()
    graph.remove_edges_from(BACK_UP)
    assert graph.has_edge("corpora", "params") and graph.has_edge("cli", "params")
    graph.add_edge("params", "corpora")
    assert any({"params", "corpora"} <= c for c in nx.strongly_connected_components(graph))


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
    assert "factory.corpora.hotpotqa" not in imports_of(module_file("factory.names"))  # names() only
