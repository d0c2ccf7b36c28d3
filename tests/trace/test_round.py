"""A round's TRACE export as the export-trace stage reads and writes it (factory/trace/round.py): what
``read_inputs`` reads of the round (and the command it names when an input is missing), and the files
``write_export`` writes."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

import schemas
from factory.backtrace.labels import backtrace
from factory.backtrace.rows import labels_index
from factory.params.label_sections import BacktraceParams
from factory.params.round_sections import TraceParams
from factory.retrieval.store import PassageStore
from factory.trace.export import TraceExport, export_stats, export_trace
from factory.trace.round import read_inputs, write_export
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.variants.registry import select_units
from factory.variants.round import write_selections
from tests.scripted import own_passages, scripted_trajectories

MODE, TARGET = "undirected_shortest", "thought_and_answer"
ROUND = "variant backtrace, round 0, seed 0"
OUTCOME_COLUMNS = ["trajectory_id", "question_id", "policy", "correct"]  # what the stage passes


@pytest.fixture(scope="module")
def material(ingested):
    """Three scripted trajectories on train questions (as a model policy's: the export refuses scripted
    ones), the last one made incorrect, two other questions and their passages as noise."""
    train = sorted((q for q in ingested.questions if q["split"] == "train"), key=lambda q: q["question_id"])
    asked, others = train[:3], train[3:5]
    trajectories = [
        {**t, "policy": "base"} for t in scripted_trajectories(asked, own_passages(asked), run_id="trace")
    ]
    assert all(t["correct"] for t in trajectories)
    trajectories[-1] = {**trajectories[-1], "correct": False, "answer": "nobody", "em": 0.0, "f1": 0.0}
    labels = [backtrace(t) for t in trajectories] + [
        backtrace(t, BacktraceParams(mode="directed_reach", target_mode="answer_only")) for t in trajectories
    ]
    return {
        "trajectories": trajectories,
        "labels": labels,
        "questions": asked + others,
        "passages": own_passages(asked + others),
    }


@pytest.fixture
def project(tmp_path, monkeypatch, material):
    """A project with every input of the round: trajectories, labels, questions and the passage store."""
    monkeypatch.chdir(tmp_path)
    schemas.write_parquet(material["trajectories"], paths.trajectories("backtrace", 0), "trajectory")
    schemas.write_parquet(material["labels"], paths.labels("backtrace", 0), "labels")
    schemas.write_parquet(material["questions"], paths.QUESTIONS, "question")
    PassageStore.from_rows(material["passages"]).save(paths.INDEX_DIR)
    correct = {t["trajectory_id"]: t for t in material["trajectories"] if t["correct"]}
    labels = labels_index(material["labels"], MODE, TARGET)
    kept = {tid: select_units(t, labels[tid], "backtrace", 17) for tid, t in correct.items()}
    write_selections(paths.supervision_dir("backtrace", 0), "backtrace", kept)
    return tmp_path


def outcomes() -> list[dict]:
    return schemas.read_rows(paths.trajectories("backtrace", 0), OUTCOME_COLUMNS)


def read_round():
    return read_inputs(
        outcomes(),
        paths.trajectories("backtrace", 0),
        paths.labels("backtrace", 0),
        paths.supervision_dir("backtrace", 0) / paths.KEPT,
        MODE,
        TARGET,
        ROUND,
    )


def test_read_inputs_reads_what_the_export_needs_and_no_more(project, material):
    inputs = read_round()
    correct = [t for t in material["trajectories"] if t["correct"]]
    wrong = material["trajectories"][-1]
    by_tid = {t["trajectory_id"]: t for t in inputs.trajectories}
    assert set(by_tid) == {t["trajectory_id"] for t in material["trajectories"]}
    # an incorrect trajectory only as its outcome; the correct ones whole, without their prompts
    assert by_tid[wrong["trajectory_id"]] == {c: wrong[c] for c in OUTCOME_COLUMNS}
    for t in correct:
        read = by_tid[t["trajectory_id"]]
        assert read["triplets"] == t["triplets"] and len(read["steps"]) == len(t["steps"])
        assert all("messages" not in s for s in read["steps"])
        assert [s["output"] for s in read["steps"]] == [s["output"] for s in t["steps"]]
    # labels of the correct trajectories under the one mode x target mode
    assert sorted(r["trajectory_id"] for r in inputs.labels) == sorted(t["trajectory_id"] for t in correct)
    assert {(r["mode"], r["target_mode"]) for r in inputs.labels} == {(MODE, TARGET)}
    # what the set kept of the correct trajectories
    assert sorted(r["trajectory_id"] for r in inputs.kept) == sorted(t["trajectory_id"] for t in correct)
    # the questions of every trajectory of the round (answers and supporting facts only)
    asked = {t["question_id"] for t in material["trajectories"]}
    assert set(inputs.questions) == asked
    assert all(set(q) == {"question_id", "answers", "supporting"} for q in inputs.questions.values())
    # the passages the correct trajectories were shown
    shown = {pid for t in correct for s in t["steps"] for pid in s["retrieved"]}
    assert shown and set(inputs.passages) == shown
    assert all(p["text"] for p in inputs.passages.values())


@pytest.mark.parametrize(
    ("missing", "command"),
    [
        (lambda: paths.labels("backtrace", 0), "factory backtrace"),
        (lambda: paths.supervision_dir("backtrace", 0) / paths.KEPT, "factory variants"),
        (lambda: paths.QUESTIONS, "factory ingest"),
        (lambda: paths.INDEX_DIR, "factory index"),
    ],
)
def test_a_missing_input_is_an_error_naming_the_command_to_run(project, missing, command):
    import shutil

    path = missing()
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    with pytest.raises(FactoryError) as err:
        read_round()
    message = str(err.value)
    assert f"run `{command}` first" in message and str(path) in message and ROUND in message


def test_a_round_without_a_correct_trajectory_reads_no_labels_nor_passages(project, material):
    rows = [{**t, "correct": False} for t in material["trajectories"]]
    schemas.write_parquet(rows, paths.trajectories("backtrace", 0), "trajectory")
    inputs = read_round()
    assert inputs.labels == [] and inputs.passages == {}
    assert all("steps" not in t for t in inputs.trajectories) and len(inputs.trajectories) == 3


def test_write_export_writes_parquet_jsonl_and_stats_with_the_same_rows(project, tmp_path):
    inputs = read_round()
    result = export_trace(
        inputs.trajectories,
        inputs.labels,
        inputs.kept,
        inputs.questions,
        inputs.passages,
        TraceParams(),
        variant="backtrace",
        round_=0,
        mode=MODE,
        target_mode=TARGET,
    )
    assert result.sft and result.rl
    stats = {"status": "ok", **export_stats(result, len(inputs.trajectories))}
    out = tmp_path / "out" / "trace" / "round_0"  # not there yet
    write_export(out, result, stats)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["sft.parquet", "rl.parquet", "sft.jsonl", "rl.jsonl", "stats.json"]
    )
    sft, rl = pq.read_table(out / "sft.parquet"), pq.read_table(out / "rl.parquet")
    assert sft.schema.equals(schemas.TRACE_SFT) and rl.schema.equals(schemas.TRACE_RL)
    assert (sft.num_rows, rl.num_rows) == (len(result.sft), len(result.rl))
    sft_lines = [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]
    assert sft_lines == [{"messages": r["messages"]} for r in result.sft]
    rl_lines = [json.loads(line) for line in (out / "rl.jsonl").read_text().splitlines()]
    assert rl_lines == json.loads(json.dumps(result.rl)) and rl_lines[0]["prompt"]
    saved = json.loads((out / "stats.json").read_text())
    assert (saved["sft_records"], saved["rl_records"], saved["trajectories"]) == (
        len(sft_lines),
        len(rl_lines),
        3,
    )
    assert saved["by_status"] == stats["by_status"]


def test_write_export_of_nothing_writes_empty_files(tmp_path):
    nothing = TraceExport()
    stats = {"status": "empty", **export_stats(nothing, 0)}
    write_export(tmp_path, nothing, stats)
    assert pq.read_table(tmp_path / "sft.parquet").schema.equals(schemas.TRACE_SFT)
    assert pq.read_table(tmp_path / "rl.parquet").num_rows == 0
    assert (tmp_path / "sft.jsonl").read_text() == (tmp_path / "rl.jsonl").read_text() == ""
    assert json.loads((tmp_path / "stats.json").read_text())["sft_records"] == 0
