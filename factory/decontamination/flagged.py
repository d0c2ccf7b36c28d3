"""The flagged training-pool questions, as the stages that draw questions read them."""

from __future__ import annotations

from pathlib import Path

from factory.utils.io import read_jsonl


def contaminated_ids(path: str | Path) -> set[str]:
    """The question ids ``contamination.jsonl`` flags: never drawn for generation or held-out evaluation."""
    return {row["question_id"] for row in read_jsonl(path)}
