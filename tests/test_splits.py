import copy
import json

from factory.corpora import ingest_sources
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
