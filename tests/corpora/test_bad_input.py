"""Bad input made from the shared corpora: a record the gate would reject is quarantined where it is
read, a file is read by what it is (or refused by name), and the good records of the same file come
through."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import zipfile
from pathlib import Path

import pytest

from factory.corpora.ingest import ingest_sources
from factory.utils.errors import FactoryError
from schemas import num_rows
from tests.corpora.test_corpora import params_for


def _hotpot(corpora: Path, n: int = 5) -> list[dict]:
    return json.loads((corpora / "hotpotqa" / "dev_sample.json").read_text())[:n]


def _musique_lines(corpora: Path, n: int = 4) -> list[str]:
    return (corpora / "musique" / "dev_sample.jsonl").read_text().splitlines()[:n]


def _adds_up(result, dataset: str) -> dict:
    c = result.counts["datasets"][dataset]
    assert c["read"] == c["ingested"] + c["quarantined"] + c["capped"]
    return c


# ---------------------------------------------------------------- per-record problems are per-record


def test_a_hotpotqa_paragraph_without_sentences_is_quarantined_and_the_rest_ingested(tmp_path, corpora):
    records = _hotpot(corpora)
    title = records[2]["context"][3][0]
    records[2]["context"][3][1] = []
    f = tmp_path / "h.json"
    f.write_text(json.dumps(records))
    result = ingest_sources(params_for({"hotpotqa": [f]}))
    [bad] = result.quarantine
    assert (bad["id"], bad["field"], bad["where"]) == (records[2]["_id"], "context[3]", "h.json[2]")
    assert bad["reason"] == f"paragraph {title!r} has no text"
    assert len(result.questions) == 4 and _adds_up(result, "hotpotqa")["quarantined"] == 1
    assert all(p["text"] and p["sentences"] for p in result.passages)


def test_a_musique_paragraph_with_empty_text_and_a_12_step_decomposition_are_quarantined(tmp_path, corpora):
    lines = _musique_lines(corpora)
    empty, long = json.loads(lines[1]), json.loads(lines[2])
    empty["paragraphs"][4]["paragraph_text"] = "  "
    step = long["question_decomposition"][0]
    long["question_decomposition"] = [dict(step, id=i) for i in range(12)]
    f = tmp_path / "m.jsonl"
    f.write_text("\n".join([lines[0], json.dumps(empty), json.dumps(long), lines[3]]) + "\n")
    result = ingest_sources(params_for({"musique": [f]}))
    by_where = {b["where"]: b for b in result.quarantine}
    assert by_where["m.jsonl:2"]["field"] == "paragraphs[4].paragraph_text"
    assert "has no text" in by_where["m.jsonl:2"]["reason"]
    assert by_where["m.jsonl:3"]["field"] == "question_decomposition"
    assert by_where["m.jsonl:3"]["reason"] == "12 hops: a question has between 2 and 10"
    assert len(result.questions) == 2 and _adds_up(result, "musique")["quarantined"] == 2


def test_the_stage_publishes_the_good_records_of_a_file_with_records_the_gate_would_reject(
    tmp_path, corpora, monkeypatch
):
    from factory.stages import s01_ingest

    lines = _musique_lines(corpora, 20)
    bad = json.loads(lines[5])
    bad["paragraphs"][0]["paragraph_text"] = ""
    lines[5] = json.dumps(bad)
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    s01_ingest.run(params_for({"musique": [tmp_path / "m.jsonl"]}))
    metrics = json.loads((tmp_path / "metrics" / "ingest.json").read_text())
    total = metrics["total"]
    assert (total["read"], total["ingested"], total["quarantined"], total["capped"]) == (20, 19, 1, 0)
    assert num_rows(tmp_path / "data/interim/questions.parquet") == 19
    assert metrics["expectations_passed"] == 20
    [entry] = [json.loads(x) for x in (tmp_path / "data/interim/quarantine.jsonl").read_text().splitlines()]
    assert entry["where"] == "m.jsonl:6" and entry["field"] == "paragraphs[0].paragraph_text"


# ---------------------------------------------------------------- files are read by what they are


@pytest.mark.parametrize("kind", ["json", "jsonl"])
@pytest.mark.parametrize("wrap", ["bom", "gzip", "bz2", "xz"])
def test_a_bom_and_compression_are_read_as_the_plain_file(tmp_path, corpora, kind, wrap):
    records = _hotpot(corpora, 6)
    text = json.dumps(records) if kind == "json" else "\n".join(json.dumps(r) for r in records) + "\n"
    plain = tmp_path / f"plain.{kind}"
    plain.write_text(text)
    data = text.encode()
    packed = {
        "bom": b"\xef\xbb\xbf" + data,
        "gzip": gzip.compress(data),
        "bz2": bz2.compress(data),
        "xz": lzma.compress(data),
    }[wrap]
    other = tmp_path / f"other.{kind}"  # the name says nothing: the bytes do
    other.write_bytes(packed)
    expected = ingest_sources(params_for({"hotpotqa": [plain]}))
    result = ingest_sources(params_for({"hotpotqa": [other]}))
    assert len(result.questions) == 6 and not result.quarantine
    strip = lambda q: {k: v for k, v in q.items() if k != "source_file"}  # noqa: E731
    assert [strip(q) for q in result.questions] == [strip(q) for q in expected.questions]


def test_a_wrapped_list_is_refused_naming_its_keys(tmp_path, corpora):
    f = tmp_path / "wrapped.json"
    f.write_text(json.dumps({"version": "1.0", "data": _hotpot(corpora, 3)}, indent=1))
    with pytest.raises(FactoryError) as exc:
        ingest_sources(params_for({"hotpotqa": [f]}))
    message = str(exc.value)
    assert "wrapped.json holds one JSON object with the top-level keys ['data', 'version']" in message
    assert "the records seem to be the list under 'data'" in message


def test_a_file_of_one_record_is_that_record(tmp_path, corpora):
    f = tmp_path / "one.json"
    f.write_text(json.dumps(json.loads(_musique_lines(corpora, 1)[0]), indent=2))
    result = ingest_sources(params_for({"musique": [f]}))
    assert len(result.questions) == 1 and result.questions[0]["source_file"] == "one.json"


def test_an_empty_file_is_reported_and_the_other_files_ingested(tmp_path, corpora, caplog):
    good, empty, no_records = tmp_path / "h.json", tmp_path / "empty.json", tmp_path / "none.json"
    good.write_text(json.dumps(_hotpot(corpora, 4)))
    empty.write_bytes(b"")
    no_records.write_text("[]\n")
    result = ingest_sources(params_for({"hotpotqa": [good, empty, no_records]}))
    c = _adds_up(result, "hotpotqa")
    assert c["ingested"] == 4
    assert c["empty_files"] == {str(empty): "0 bytes", str(no_records): "no records"}
    assert f"hotpotqa corpus file {empty} is empty (0 bytes)" in caplog.text


def test_a_dataset_left_with_no_file_is_an_error(tmp_path, corpora):
    good, empty = tmp_path / "h.json", tmp_path / "m.jsonl"
    good.write_text(json.dumps(_hotpot(corpora, 3)))
    empty.write_bytes(b"")
    with pytest.raises(FactoryError, match=rf"corpora\.musique: no file holds a record \({empty}: 0 bytes\)"):
        ingest_sources(params_for({"hotpotqa": [good], "musique": [empty]}))


def test_invalid_utf8_in_a_json_list_quarantines_that_record_naming_the_byte(tmp_path, corpora):
    records = _hotpot(corpora, 5)
    records[3]["question"] = "MARK" + records[3]["question"]
    data = json.dumps(records, ensure_ascii=False).encode().replace(b"MARK", b"\xff")
    f = tmp_path / "h.json"
    f.write_bytes(data)
    result = ingest_sources(params_for({"hotpotqa": [f]}))
    [bad] = result.quarantine
    offset = data.index(b"\xff")
    assert (bad["where"], bad["field"], bad["id"]) == ("h.json[3]", "<bytes>", records[3]["_id"])
    assert bad["reason"].startswith(f"invalid UTF-8 at byte offset {offset} (byte 0xff)")
    assert len(result.questions) == 4


def test_invalid_utf8_in_a_jsonl_line_quarantines_that_line(tmp_path, corpora):
    lines = [line.encode() for line in _musique_lines(corpora, 3)]
    lines[1] = lines[1].replace(b'"question": "', b'"question": "\xc3(', 1)
    f = tmp_path / "m.jsonl"
    f.write_bytes(b"\n".join(lines) + b"\n")
    result = ingest_sources(params_for({"musique": [f]}))
    [bad] = result.quarantine
    assert (bad["where"], bad["field"]) == ("m.jsonl:2", "<bytes>")
    offset = f.read_bytes().index(b"\xc3(")
    assert f"invalid UTF-8 at byte offset {offset}" in bad["reason"]
    assert len(result.questions) == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"_id,question\n1,who?\n", r"not a corpus file: it starts with b'_' at byte offset 0"),
        (b"\xff\xfe[\x00]\x00", r"is UTF-16 text \(it starts with a UTF-16 byte-order mark\)"),
        (b'{\n  "_id": "a",\n  "question": oops\n}\n', r"neither JSON Lines \(line 1 is not valid JSON"),
        (gzip.compress(b"[1, 2, 3]")[:-12], r"the gzip data is corrupt or cut short"),
    ],
    ids=["csv", "utf-16", "broken object", "truncated gzip"],
)
def test_what_is_not_a_corpus_file_is_refused_by_name(tmp_path, content, message):
    f = tmp_path / "x.json"
    f.write_bytes(content)
    with pytest.raises(FactoryError, match=message) as exc:
        ingest_sources(params_for({"hotpotqa": [f]}))
    assert str(f) in str(exc.value)


def test_an_archive_is_refused_by_name(tmp_path, corpora):
    f = tmp_path / "h.zip"
    with zipfile.ZipFile(f, "w") as archive:
        archive.writestr("h.json", json.dumps(_hotpot(corpora, 2)))
    with pytest.raises(FactoryError, match=r"h\.zip is a zip archive, which ingest does not unpack"):
        ingest_sources(params_for({"hotpotqa": [f]}))


def test_a_folder_or_an_unreadable_file_is_named(tmp_path, corpora, monkeypatch):
    with pytest.raises(FactoryError, match=rf"corpus file {tmp_path} is a folder, not a file"):
        ingest_sources(params_for({"hotpotqa": [tmp_path]}))
    f = tmp_path / "h.json"
    f.write_text(json.dumps(_hotpot(corpora, 2)))
    real_open = Path.open

    def denied(self, *args, **kwargs):  # what a file without read permission does (tests may run as root)
        if self == f:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", denied)
    with pytest.raises(FactoryError, match=rf"cannot read corpus file {f}: permission denied"):
        ingest_sources(params_for({"hotpotqa": [f]}))
