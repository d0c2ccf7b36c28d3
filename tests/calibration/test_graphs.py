"""Reading calibration graph files: any file of the contract, a bad record left out with its reason."""

from __future__ import annotations

import json

import pytest

from factory.calibration.graphs import passage_sentences, read_graph_files, require_graphs, to_trajectory
from factory.utils.errors import FactoryError
from tests.calibration.graphs import SHARED, film_record, write_jsonl


def test_the_shared_real_graphs_are_read_whole():
    graphs = read_graph_files([SHARED])
    assert len(graphs.records) == 40 and graphs.problems == [] and graphs.missing == []
    assert all(r["dataset"] == "musique" for r in graphs.records)


def test_a_bad_record_is_left_out_with_its_file_line_field_and_reason(tmp_path):
    good = film_record("toy/good")
    no_answers = {**film_record("toy/a"), "answers": []}
    stray = film_record("toy/b")
    stray["triplets"][0]["passage_index"] = 7
    no_gold = film_record("toy/c")
    for p in no_gold["passages"]:
        p["is_supporting"] = False
    path = write_jsonl(tmp_path / "g.jsonl", [good, no_answers, stray, no_gold, good])
    with open(path, "a") as fh:
        fh.write("{not json\n")
    graphs = read_graph_files([path, tmp_path / "absent.jsonl"])
    assert [r["question_id"] for r in graphs.records] == ["toy/good"]
    why = {(p["question_id"], p["field"]): p["reason"] for p in graphs.problems}
    assert why[("toy/a", "answers")].startswith("must be a non-empty list")
    assert why[("toy/b", "triplets[0].passage_index")] == "7 names no passage of the record"
    assert why[("toy/c", "passages")].startswith("no passage is marked is_supporting")
    assert why[("toy/good", "question_id")].startswith("repeats")
    assert len(graphs.problems) == 5 and all(p["file"] == str(path) for p in graphs.problems)
    assert graphs.missing == [str(tmp_path / "absent.jsonl")]


def test_a_file_of_nothing_readable_stops_naming_the_first_problem(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [{"question_id": "x"}, {"question_id": "y"}])
    with pytest.raises(FactoryError, match=r"g.jsonl .* field dataset: is missing"):
        require_graphs(read_graph_files([path]))
    require_graphs(read_graph_files([tmp_path / "absent.jsonl"]))  # no file at all: an empty result, no error


def test_per_sentence_extraction_keeps_its_sentences(tmp_path):
    record = film_record()
    record["passages"][1]["sentences"] = ["Jane Doe is a director.", "She was born in Paris."]
    record["triplets"][1]["sentence_index"] = 1
    trajectory = to_trajectory(json.loads(json.dumps(record)))
    assert [t["source_sentence"] for t in trajectory["triplets"][:2]] == [None, 1]
    sentences = passage_sentences(record)
    assert sentences["toy/1#p1"] == ["Jane Doe is a director.", "She was born in Paris."]
    assert sentences["toy/1#p0"] == ["Film X is a 1999 film directed by Jane Doe."]  # split from the text
