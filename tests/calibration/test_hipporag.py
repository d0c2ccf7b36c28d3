"""HippoRAG's published OpenIE output and the official MuSiQue records give the shared graph file back.

The shared file was made from HippoRAG's OpenIE output (commit and path in factory/calibration/hipporag.py)
and the MuSiQue train records that ../shared/corpora also holds. The test writes the OpenIE output's
shape from the shared file (one doc per passage with its extracted triples), converts it with those
records through the command, and gets every shared record back."""

from __future__ import annotations

import json

from factory.cli import main
from tests.calibration.graphs import SHARED
from tests.conftest import CORPORA


def _openie_of(records: list[dict]) -> dict:
    docs = []
    for r in records:
        for p in r["passages"]:
            triples = [[t["subject"], t["relation"], t["object"]] for t in r["triplets"]
                       if t["passage_index"] == p["passage_index"]]  # fmt: skip
            docs.append({"title": p["title"], "text": p["text"], "passage": f"{p['title']}\n{p['text']}",
                         "extracted_entities": [], "extracted_triples": triples})  # fmt: skip
    docs.append({"title": "Other", "text": "Unrelated.", "extracted_triples": [["a", "b"], ["x", "y", "z"]]})
    return {"docs": docs, "ents_by_doc": []}


def test_the_openie_output_and_the_musique_records_give_the_shared_file(tmp_path, capsys):
    shared = [json.loads(line) for line in SHARED.read_text().splitlines()]
    openie = tmp_path / "openie.json"
    openie.write_text(json.dumps(_openie_of(shared)))
    out = tmp_path / "graphs.jsonl"
    records = CORPORA / "musique" / "train_sample.jsonl"  # holds the 40 questions and 40 others
    argv = ["calibration-graphs", "--openie", str(openie), "--records", str(records), "--output", str(out)]
    assert main(argv) == 0
    assert "40 records" in capsys.readouterr().err
    got = {r["question_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    for want in shared:
        assert got[want["question_id"]] == {k: v for k, v in want.items() if k != "corpora_split"}


def test_records_the_output_does_not_cover_are_refused_in_words(tmp_path, capsys):
    openie = tmp_path / "openie.json"
    openie.write_text(json.dumps({"docs": []}))
    records = CORPORA / "musique" / "dev_sample.jsonl"
    out = tmp_path / "o"
    argv = ["calibration-graphs", "--openie", str(openie), "--records", str(records), "--output", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "is not among the OpenIE passages" in err and "data/musique_train.json" in err
    assert not out.exists()
    (tmp_path / "bad.json").write_text("[1, 2]")
    argv[2] = str(tmp_path / "bad.json")
    assert main(argv) == 1 and "not HippoRAG's OpenIE output" in capsys.readouterr().err
