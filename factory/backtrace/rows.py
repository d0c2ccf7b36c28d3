"""The backtrace stage's labels rows as the later stages read them: one owner, so the variants, the
causal check and the TRACE export index the same rows the same way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from factory.utils.errors import FactoryError


def labels_index(labels: Iterable[Mapping], mode: str, target_mode: str) -> dict[str, Mapping]:
    """Labels rows of one mode x target mode by trajectory id (a second row for a trajectory is an error)."""
    out: dict[str, Mapping] = {}
    for row in labels:
        if row["mode"] != mode or row["target_mode"] != target_mode:
            continue
        if row["trajectory_id"] in out:
            raise FactoryError(
                f"labels: two rows for trajectory {row['trajectory_id']!r} under {mode} x {target_mode}"
            )
        out[row["trajectory_id"]] = row
    return out
