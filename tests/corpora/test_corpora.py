import json
from pathlib import Path

import pytest

from factory.corpora.ingest import ingest_sources
from factory.params.config import Params
from factory.utils.errors import FactoryError
from schemas import QUESTION

ROOT = Path(__file__).resolve().parents[1]


def params_for(files: dict, official: str = "dev", **ingest) -> Params:
    """Params reading ``files`` (dataset -> paths); a file whose name tells no official split (the tests'
    own ``h.json``) is stated as ``official``."""
    from factory.corpora.official import split_of_name

    corpora = {k: [str(f) for f in v] for k, v in files.items()}
    stated = {f: official for fs in corpora.values() for f in fs if split_of_name(Path(f).name) is None}
    return Params(corpora=corpora, ingest=ingest, splits={"official": stated})


# ---------------------------------------------------------------- loaders on the shared corpora


def test_loaders_read_every_shared_record(ingested):
    c = ingested.counts["datasets"]
    assert c["hotpotqa"]["read"] == 839 + 160 and c["hotpotqa"]["quarantined"] == 0
    assert c["2wikimultihopqa"]["read"] == 526
    assert c["musique"]["read"] == 315 + 80 and c["musique"]["ingested"] == 395
    for ds in c.values():
        assert ds["read"] == ds["ingested"] + ds["quarantined"] + ds["capped"]
        for t in ds["by_type"].values():
            assert t["read"] == t["ingested"] + t["quarantined"] + t["capped"]


def test_the_three_bad_2wiki_records_are_quarantined_with_reason(ingested):
    bad = [b for b in ingested.quarantine if b["dataset"] == "2wikimultihopqa"]
    assert len(bad) == 3
    assert all(b["field"] == "supporting_facts" and "out of range" in b["reason"] for b in bad)
    assert {b["id"] for b in bad} == {
        "c049b0240bdd11eba7f7acde48001122",
        "2a84a2920bdd11eba7f7acde48001122",
        "eb2a75220bdc11eba7f7acde48001122",
    }


def test_fields_routes_and_supporting_facts_resolve(questions_by_id):
    q = questions_by_id["hotpotqa/5a8b57f25542995d1e6f1371"]  # "Were Scott Derrickson and Ed Wood ..." (dev)
    assert q["qtype"] == "comparison" and q["route"] == "parallel" and q["answers"] == ["yes"]
    for qq in questions_by_id.values():
        pids = {p["pid"]: p for p in qq["passages"]}
        for s in qq["supporting"]:
            assert s["pid"] in pids and pids[s["pid"]]["title"] == s["title"]
            assert s["sent_idx"] == -1 or s["sent_idx"] < len(pids[s["pid"]]["sentences"])
    wiki = [q for q in questions_by_id.values() if q["dataset"] == "2wikimultihopqa"]
    assert all(q["evidences"] for q in wiki)
    assert {q["route"] for q in wiki if q["qtype"] in ("comparison", "bridge_comparison")} == {"parallel"}
    assert {q["route"] for q in wiki if q["qtype"] in ("compositional", "inference")} == {"chain"}
    musique = [q for q in questions_by_id.values() if q["dataset"] == "musique"]
    assert all(
        q["route"] == "chain" and q["decomposition"] and q["hops"] == len(q["decomposition"]) for q in musique
    )
    assert all(s["sent_idx"] == -1 for q in musique for s in q["supporting"])
    # MuSiQue aliases follow the gold answer
    with_alias = next(q for q in musique if len(q["answers"]) > 1)
    assert with_alias["answers"][0].strip()


def test_passages_are_deduplicated_with_stable_pids(ingested):
    pids = [p["pid"] for p in ingested.passages]
    assert len(pids) == len(set(pids))
    referenced = {p["pid"] for q in ingested.questions for p in q["passages"]}
    assert referenced == set(pids)
    assert sum(len(q["passages"]) for q in ingested.questions) > len(pids)  # shared paragraphs exist


def test_questions_validate_against_the_contract(ingested):
    from schemas import to_table

    table = to_table(ingested.questions[:50], QUESTION, "question")
    assert table.num_rows == 50


# ---------------------------------------------------------------- splits


# ---------------------------------------------------------------- bad input


def _hotpot(corpora, n=5):
    return json.loads((corpora / "hotpotqa" / "dev_sample.json").read_text())[:n]


@pytest.mark.parametrize("dataset", ["hotpotqa", "2wikimultihopqa"])
def test_typed_fast_path_builds_the_same_rows_as_the_field_by_field_path(corpora, dataset):
    from factory.corpora import corpus
    from factory.corpora.files import read_json_records
    from factory.corpora.pool import PassagePool

    c = corpus(dataset)
    path = corpora / dataset / "dev_sample.json"
    typed = list(read_json_records(path, c.record_type))
    untyped = list(read_json_records(path))
    assert isinstance(typed[0][1], c.record_type) and isinstance(untyped[0][1], dict)

    def built(records):
        pool, out = PassagePool(), []
        for where, record in records:
            try:
                row = c.build(record, where, path.name, pool)
            except FactoryError as bad:
                out.append(str(bad))
                continue
            paragraphs = [
                (pool.pids[e], pool.titles[e], pool.texts[e], pool.sentences[e]) for e in row.pop("passages")
            ]
            out.append((row, paragraphs))
        return out

    assert built(typed) == built(untyped)  # rows, paragraphs and the quarantine reasons alike


def test_invalid_json_names_file_and_position(tmp_path):
    f = tmp_path / "broken.json"
    f.write_text('[\n {"_id": "a",\n  "question": oops}\n]')
    with pytest.raises(FactoryError, match=r"broken.json: not valid JSON.*line 3"):
        ingest_sources(params_for({"hotpotqa": [f]}))


def test_invalid_jsonl_line_is_named(tmp_path, corpora):
    good = (corpora / "musique" / "dev_sample.jsonl").read_text().splitlines()[:2]
    f = tmp_path / "m.jsonl"
    f.write_text("\n".join(good + ['{"id": "x", "paragraphs": [']) + "\n")
    res = ingest_sources(params_for({"musique": [f]}))  # a torn last line costs that line only
    assert len(res.questions) == 2 and len(res.quarantine) == 1
    bad = res.quarantine[0]
    assert bad["where"] == "m.jsonl:3" and bad["field"] == "<line>"
    assert bad["reason"].startswith("line 3 is not valid JSON: Input data was truncated")
    with pytest.raises(FactoryError, match=r"\(m.jsonl:3\): field '<line>': line 3 is not valid JSON"):
        ingest_sources(params_for({"musique": [f]}, on_bad_record="fail"))


BAD_CASES = [
    ("missing field", lambda r: r.pop("question"), "question", "missing"),
    ("mistyped field", lambda r: r.__setitem__("answer", 42), "answer", "expected string"),
    ("empty answer", lambda r: r.__setitem__("answer", "  "), "answer", "empty answer"),
    ("empty question", lambda r: r.__setitem__("question", " "), "question", "empty"),
    (
        "unknown supporting title",
        lambda r: r["supporting_facts"].append(["Not A Title", 0]),
        "supporting_facts",
        "not in the record's context",
    ),
    (
        "sentence index out of range",
        lambda r: r["supporting_facts"].append([r["context"][0][0], 99]),
        "supporting_facts",
        "out of range",
    ),
    ("context entry malformed", lambda r: r["context"].append(["only title"]), "context[10]", "pair"),
    ("sentence not a string", lambda r: r["context"][3][1].append(7), "context[3]", "sentences must be"),
]


@pytest.mark.parametrize(("label", "mutate", "field", "reason"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_records_are_quarantined_with_field_and_reason(tmp_path, corpora, label, mutate, field, reason):
    recs = _hotpot(corpora)
    mutate(recs[2])
    f = tmp_path / "h.json"
    f.write_text(json.dumps(recs))
    res = ingest_sources(params_for({"hotpotqa": [f]}))
    assert len(res.questions) == 4 and len(res.quarantine) == 1
    bad = res.quarantine[0]
    assert bad["id"] == recs[2]["_id"] and bad["field"] == field and reason in bad["reason"]
    assert bad["where"] == "h.json[2]"
    c = res.counts["datasets"]["hotpotqa"]
    assert (c["read"], c["ingested"], c["quarantined"]) == (5, 4, 1)


@pytest.mark.parametrize(
    ("label", "mutate", "field", "reason"), BAD_CASES[:3], ids=[c[0] for c in BAD_CASES[:3]]
)
def test_fail_mode_names_record_and_field(tmp_path, corpora, label, mutate, field, reason):
    recs = _hotpot(corpora)
    mutate(recs[1])
    f = tmp_path / "h.json"
    f.write_text(json.dumps(recs))
    with pytest.raises(FactoryError) as exc:
        ingest_sources(params_for({"hotpotqa": [f]}, on_bad_record="fail"))
    assert recs[1]["_id"] in str(exc.value) and f"field '{field}'" in str(exc.value)


def test_a_title_with_other_sentences_is_another_passage(tmp_path, corpora):
    recs = _hotpot(corpora, 3)
    title, sentences = recs[0]["context"][0]
    recs[1]["context"][0] = [title, [*sentences, " A sentence the first record does not have."]]
    recs[2]["context"][0] = [title, list(sentences)]  # the first record's paragraph again
    for r in recs[1:]:
        r["supporting_facts"] = [[title, 0]]
    res = ingest_sources(params_for({"hotpotqa": [_write(tmp_path / "h.json", recs)]}))
    first, other, again = (q["passages"][0] for q in res.questions)
    assert first["title"] == other["title"] == again["title"] == title
    assert (
        other["sentences"] == [*sentences, " A sentence the first record does not have."]
        and again["sentences"] == sentences
    )
    assert first["pid"] == again["pid"] != other["pid"]
    assert [q["supporting"][0]["pid"] for q in res.questions[1:]] == [other["pid"], first["pid"]]
    by_pid = {p["pid"]: p for p in res.passages}
    assert (
        by_pid[first["pid"]]["sentences"] == sentences
        and by_pid[other["pid"]]["sentences"] == other["sentences"]
    )


def test_duplicate_ids_keep_the_first(tmp_path, corpora):
    recs = _hotpot(corpora, 3)
    f = tmp_path / "h.json"
    f.write_text(json.dumps(recs + [recs[0]]))
    res = ingest_sources(params_for({"hotpotqa": [f]}))
    assert len(res.questions) == 3
    assert (
        res.quarantine[0]["reason"].startswith("duplicate id") and res.quarantine[0]["where"] == "h.json[3]"
    )


def test_non_object_record_is_quarantined(tmp_path, corpora):
    f = tmp_path / "h.json"
    f.write_text(json.dumps(_hotpot(corpora, 2) + ["not a record"]))
    res = ingest_sources(params_for({"hotpotqa": [f]}))
    assert res.quarantine[0]["field"] == "<record>"


def test_musique_bad_paragraph_flag(tmp_path, corpora):
    lines = (corpora / "musique" / "dev_sample.jsonl").read_text().splitlines()[:3]
    rec = json.loads(lines[1])
    rec["paragraphs"][0]["is_supporting"] = "yes"
    f = tmp_path / "m.jsonl"
    f.write_text("\n".join([lines[0], json.dumps(rec), lines[2]]))
    res = ingest_sources(params_for({"musique": [f]}))
    assert (
        res.quarantine[0]["field"] == "paragraphs[0].is_supporting"
        and res.quarantine[0]["where"] == "m.jsonl:2"
    )


def test_missing_corpus_file_is_a_clear_error(tmp_path):
    with pytest.raises(FactoryError, match="does not exist"):
        ingest_sources(params_for({"hotpotqa": [tmp_path / "nope.json"]}))


# ---------------------------------------------------------------- Hugging Face datasets source


def test_hf_dataset_saved_locally_in_hub_layout(tmp_path, corpora):
    import datasets

    recs = _hotpot(corpora, 6)
    rows = [
        {
            "id": r["_id"],
            "question": r["question"],
            "answer": r["answer"],
            "type": r["type"],
            "level": r["level"],
            "supporting_facts": {
                "title": [t for t, _ in r["supporting_facts"]],
                "sent_id": [i for _, i in r["supporting_facts"]],
            },
            "context": {"title": [t for t, _ in r["context"]], "sentences": [s for _, s in r["context"]]},
        }
        for r in recs
    ]
    datasets.DatasetDict({"validation": datasets.Dataset.from_list(rows)}).save_to_disk(
        str(tmp_path / "hf_hotpot")
    )
    p = Params(
        corpora={},
        ingest={"hf": [{"dataset": "hotpotqa", "path": str(tmp_path / "hf_hotpot"), "split": "validation"}]},
    )
    res = ingest_sources(p)
    official = ingest_sources(params_for({"hotpotqa": [_write(tmp_path / "o.json", recs)]}))
    strip = lambda q: {k: v for k, v in q.items() if k != "source_file"}  # noqa: E731
    assert [strip(q) for q in res.questions] == [strip(q) for q in official.questions]


def _write(path, recs):
    path.write_text(json.dumps(recs))
    return path


# ---------------------------------------------------------------- the stage and the CLI
