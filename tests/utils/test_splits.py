import copy
import json

import pytest

from factory.corpora.ingest import ingest_sources
from factory.corpora.official import official_splits, split_of_name
from factory.utils.errors import FactoryError
from factory.utils.splits import assign_splits, split_of
from tests.corpora.test_corpora import params_for


def _with(params, **sections):
    """``params`` with whole sections replaced, validated."""
    return type(params).model_validate({**params.model_dump(), **sections})


def test_official_dev_questions_are_test_and_only_official_train_is_trained_or_held_out(ingested):
    by_official = {}
    for q in ingested.questions:
        by_official.setdefault(q["official_split"], set()).add(q["split"])
    assert by_official == {"dev": {"test"}, "train": {"train", "heldout"}}
    files = {q["source_file"]: q["official_split"] for q in ingested.questions}
    assert files == {
        "dev_sample.json": "dev",
        "train_sample.json": "train",
        "dev_sample.jsonl": "dev",
        "train_sample.jsonl": "train",
    }


def test_the_held_out_part_of_official_train_is_seeded_and_its_size_is_the_setting(ingested, corpora_params):
    again = ingest_sources(corpora_params)
    assert [q["split"] for q in again.questions] == [q["split"] for q in ingested.questions]
    pool = [q for q in ingested.questions if q["official_split"] == "train"]
    heldout = sum(q["split"] == "heldout" for q in pool) / len(pool)
    assert abs(heldout - corpora_params.splits.heldout) < 0.05
    other_seed = ingest_sources(_with(corpora_params, splits={"seed": 14}))
    assert [q["split"] for q in other_seed.questions] != [q["split"] for q in ingested.questions]


def test_a_dataset_given_with_dev_files_only_gives_test_questions_only(ingested, caplog):
    c = ingested.counts["datasets"]["2wikimultihopqa"]
    assert c["test_only"] and c["by_split"] == {"train": 0, "heldout": 0, "test": c["ingested"]}
    assert not ingested.counts["datasets"]["hotpotqa"]["test_only"]


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("hotpot_train_v1.1.json", "train"),
        ("hotpot_dev_distractor_v1.json", "dev"),
        ("hotpot_dev_fullwiki_v1.json", "dev"),
        ("musique_ans_v1.0_train.jsonl", "train"),
        ("musique_ans_v1.0_dev.jsonl", "dev"),
        ("train.json", "train"),
        ("dev.json", "dev"),
        ("dev_sample.json", "dev"),
        ("train_sample.jsonl.gz", "train"),
        ("validation-00000-of-00001.parquet", "dev"),
        ("test.json", "dev"),
        ("HotpotQA_500_benchmark.json", None),
        ("hotpot.json", None),
        ("train_dev_merged.json", None),
        ("trainer_notes.json", None),
    ],
)
def test_a_file_name_tells_its_official_split_or_nothing(name, split):
    assert split_of_name(name) == split


def test_a_file_whose_split_cannot_be_told_is_refused_before_any_read_naming_it_and_how_to_state_it(tmp_path):
    untold = tmp_path / "HotpotQA_500_benchmark.json"
    untold.write_text("[]")  # an empty list: were it read, ingest would say "no file holds a record"
    params = _with(params_for({"hotpotqa": [untold]}), splits={})
    with pytest.raises(FactoryError) as exc:
        ingest_sources(params)
    message = str(exc.value)
    assert f"cannot tell the official split of {untold} (corpora.hotpotqa)" in message
    assert f"--set 'splits.official={{{untold}: dev}}'" in message and "Nothing was read" in message


def test_a_stated_split_wins_and_a_statement_naming_no_file_is_refused(tmp_path, corpora):
    f = tmp_path / "benchmark.json"
    f.write_text((corpora / "hotpotqa" / "train_sample.json").read_text())
    params = params_for({"hotpotqa": [f]}, official="train")
    assert official_splits(params) == {str(f): "train"}
    assert {q["split"] for q in ingest_sources(params).questions} == {"train", "heldout"}
    typo = _with(params, splits={"official": {str(tmp_path / "benchmrk.json"): "dev"}})
    with pytest.raises(
        FactoryError, match="splits.official names .*benchmrk.json.*, which corpora.* does not"
    ):
        official_splits(typo)


def test_a_hugging_face_split_is_told_by_its_name_or_stated():
    from factory.params.config import Params

    params = Params(
        corpora={},
        ingest={
            "hf": [
                {"dataset": "hotpotqa", "path": "hotpotqa/hotpot_qa", "split": "train"},
                {"dataset": "hotpotqa", "path": "hotpotqa/hotpot_qa", "split": "validation"},
                {"dataset": "musique", "path": "x/y", "split": "custom", "official_split": "dev"},
            ]
        },
    )
    assert official_splits(params) == {
        "hf:hotpotqa/hotpot_qa[train]": "train",
        "hf:hotpotqa/hotpot_qa[validation]": "dev",
        "hf:x/y[custom]": "dev",
    }
    untold = _with(params, ingest={"hf": [{"dataset": "musique", "path": "x/y", "split": "s"}]})
    with pytest.raises(FactoryError, match=r"hf:x/y\[s\] \(ingest.hf\[0\]: state it with official_split"):
        official_splits(untold)


def test_equal_question_text_lands_in_one_split(tmp_path, corpora):
    recs = json.loads((corpora / "hotpotqa" / "train_sample.json").read_text())[:40]
    dupes = []
    for i, r in enumerate(recs):
        d = copy.deepcopy(r)
        d["_id"] = f"dup{i}"
        d["question"] = "  " + r["question"].upper() + " "  # same normalised text
        dupes.append(d)
    f = tmp_path / "train.json"
    f.write_text(json.dumps(recs + dupes))
    res = ingest_sources(params_for({"hotpotqa": [f]}))
    split = {q["source_id"]: q["split"] for q in res.questions}
    assert all(split[r["_id"]] == split[f"dup{i}"] for i, r in enumerate(recs))


def test_a_duplicate_with_a_smaller_id_moves_no_existing_question(tmp_path, corpora):
    """Keyed by the text, the held-out part never moves when records are added."""
    recs = json.loads((corpora / "hotpotqa" / "train_sample.json").read_text())[:60]
    alone = tmp_path / "alone_train.json"
    alone.write_text(json.dumps(recs))
    before = {q["source_id"]: q["split"] for q in ingest_sources(params_for({"hotpotqa": [alone]})).questions}
    dupes = []
    for i, r in enumerate(recs):
        d = copy.deepcopy(r)
        d["_id"] = f"0000{i:03d}"  # sorts before every real id
        dupes.append(d)
    grown = tmp_path / "grown_train.json"
    grown.write_text(json.dumps(dupes + recs))
    after = {q["source_id"]: q["split"] for q in ingest_sources(params_for({"hotpotqa": [grown]})).questions}
    assert all(after[sid] == split for sid, split in before.items())
    assert all(after[f"0000{i:03d}"] == before[r["_id"]] for i, r in enumerate(recs))
    assert set(before.values()) == {"train", "heldout"}


def test_equal_texts_share_a_split_across_datasets():
    questions = [
        {"official_split": "train", "question_norm": "who directed the film"},
        {"official_split": "train", "question_norm": "who directed the film"},
        *({"official_split": "train", "question_norm": f"question {i}"} for i in range(50)),
        {"official_split": "dev", "question_norm": "who directed the film"},
    ]
    assign_splits(questions, seed=13, heldout=0.1)
    assert (
        questions[0]["split"] == questions[1]["split"] == split_of(13, "who directed the film", "train", 0.1)
    )
    assert [q["split"] for q in questions[2:-1]] == [
        split_of(13, f"question {i}", "train", 0.1) for i in range(50)
    ]
    assert {split_of(s, "who directed the film", "train", 0.1) for s in range(60)} == {"train", "heldout"}
    assert questions[-1]["split"] == "test"  # the same text in official dev: decontamination removes the pair


def test_the_demo_pool_the_docs_state_is_what_ingest_gives(ingested):
    """docs/pipeline.md#profiles states the demo's pool under the official splits: kept true here."""
    from pathlib import Path

    counts = {s: sum(q["split"] == s for q in ingested.questions) for s in ("train", "heldout", "test")}
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "pipeline.md").read_text().split())
    assert (
        f"draws its training questions from {counts['train']} official train questions, holds out "
        f"{counts['heldout']} (`splits.heldout` 0.1) and tests on a seeded sample of {counts['test']} "
        "official dev questions"
    ) in text
