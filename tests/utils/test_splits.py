import copy
import json

from factory.corpora.ingest import ingest_sources
from factory.utils.splits import assign_splits, split_of
from tests.corpora.test_corpora import params_for


def test_splits_are_deterministic_disjoint_and_duplicate_safe(ingested, corpora_params):
    again = ingest_sources(corpora_params)
    assert [q["split"] for q in again.questions] == [q["split"] for q in ingested.questions]
    by_text = {}
    for q in ingested.questions:
        by_text.setdefault(q["question_norm"], set()).add(q["split"])
    assert all(len(s) == 1 for s in by_text.values())
    counts = {s: sum(q["split"] == s for q in ingested.questions) for s in ("train", "heldout", "test")}
    n = len(ingested.questions)
    assert (
        abs(counts["train"] / n - 0.8) < 0.05 and counts["heldout"] > 0.05 * n and counts["test"] > 0.05 * n
    )


def test_split_of_a_question_does_not_depend_on_other_records(corpora):
    one = ingest_sources(params_for({"hotpotqa": [corpora / "hotpotqa" / "dev_sample.json"]}))
    both = ingest_sources(
        params_for(
            {
                "hotpotqa": [
                    corpora / "hotpotqa" / "train_sample.json",
                    corpora / "hotpotqa" / "dev_sample.json",
                ]
            }
        )
    )
    split = {q["question_id"]: q["split"] for q in both.questions}
    assert all(split[q["question_id"]] == q["split"] for q in one.questions)


def test_equal_question_text_lands_in_one_split(tmp_path, corpora):
    recs = json.loads((corpora / "hotpotqa" / "dev_sample.json").read_text())[:40]
    dupes = []
    for i, r in enumerate(recs):
        d = copy.deepcopy(r)
        d["_id"] = f"dup{i}"
        d["question"] = "  " + r["question"].upper() + " "  # same normalised text
        dupes.append(d)
    f = tmp_path / "h.json"
    f.write_text(json.dumps(recs + dupes))
    res = ingest_sources(params_for({"hotpotqa": [f]}))
    split = {q["source_id"]: q["split"] for q in res.questions}
    assert all(split[r["_id"]] == split[f"dup{i}"] for i, r in enumerate(recs))


def test_a_duplicate_with_a_smaller_id_moves_no_existing_question(tmp_path, corpora):
    """The old rule took the split of the smallest (dataset, source id) of a text group: a newcomer
    sorting first moved the question already there. Keyed by the text, nothing moves."""
    recs = json.loads((corpora / "hotpotqa" / "dev_sample.json").read_text())[:60]
    alone = tmp_path / "alone.json"
    alone.write_text(json.dumps(recs))
    before = {q["source_id"]: q["split"] for q in ingest_sources(params_for({"hotpotqa": [alone]})).questions}
    dupes = []
    for i, r in enumerate(recs):
        d = copy.deepcopy(r)
        d["_id"] = f"0000{i:03d}"  # sorts before every real id
        dupes.append(d)
    grown = tmp_path / "grown.json"
    grown.write_text(json.dumps(dupes + recs))
    after = {q["source_id"]: q["split"] for q in ingest_sources(params_for({"hotpotqa": [grown]})).questions}
    assert all(after[sid] == split for sid, split in before.items())
    assert all(after[f"0000{i:03d}"] == before[r["_id"]] for i, r in enumerate(recs))
    assert len(set(before.values())) == 3  # the sample spans all three splits


def test_equal_texts_share_a_split_across_datasets():
    questions = [
        {"dataset": "hotpotqa", "source_id": "z9", "question_norm": "who directed the film"},
        {"dataset": "musique", "source_id": "a1", "question_norm": "who directed the film"},
        *(
            {"dataset": "2wikimultihopqa", "source_id": f"x{i}", "question_norm": f"question {i}"}
            for i in range(50)
        ),
    ]
    assign_splits(questions, seed=13, train=0.8, heldout=0.1, test=0.1)
    assert questions[0]["split"] == questions[1]["split"] == split_of(13, "who directed the film", 0.8, 0.1)
    # the split is the text's (and the seed's), whatever else is ingested
    assert [q["split"] for q in questions[2:]] == [split_of(13, f"question {i}", 0.8, 0.1) for i in range(50)]
    assert {split_of(s, "who directed the film", 0.8, 0.1) for s in range(40)} == {"train", "heldout", "test"}
