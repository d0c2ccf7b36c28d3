"""Gate of the backtrace stage: labels that refer to what the trajectories contain.

- one row per trajectory x mode x target mode (the key is unique and the row count is exactly
  trajectories x modes x target modes), every row's trajectory is in the round's file;
- kept triplet, pair and step ids all exist in that trajectory (no label points at nothing);
- 0 <= filtered_tokens <= total_tokens and fa_ratio in [0, 1]; path_found iff a triplet was kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from validators import SuiteSpec


def labels_frame(trajectories: Sequence[Mapping], labels: Sequence[Mapping]) -> pd.DataFrame:
    """Per labels row: the key and boolean columns for the cross-record checks."""
    ids = {}
    for t in trajectories:
        ids[t["trajectory_id"]] = (
            {x["triplet_id"] for x in t["triplets"]},
            {p["pair_id"] for s in t["steps"] for p in (s.get("pairs") or [])},
            {s["index"] for s in t["steps"]},
        )
    empty = (set(), set(), set())
    known = [ids.get(r["trajectory_id"], empty) for r in labels]
    return pd.DataFrame(
        {
            "key": pd.Series(
                [f"{r['trajectory_id']}|{r['mode']}|{r['target_mode']}" for r in labels], dtype=object
            ),
            "mode": pd.Series([r["mode"] for r in labels], dtype=object),
            "target_mode": pd.Series([r["target_mode"] for r in labels], dtype=object),
            "trajectory_known": pd.Series([r["trajectory_id"] in ids for r in labels], dtype=bool),
            "triplets_known": pd.Series(
                [set(r["kept_triplet_ids"]) <= k[0] for r, k in zip(labels, known)], dtype=bool
            ),
            "pairs_known": pd.Series(
                [set(r["kept_pair_ids"]) <= k[1] for r, k in zip(labels, known)], dtype=bool
            ),
            "steps_known": pd.Series(
                [set(r["kept_step_indices"]) <= k[2] for r, k in zip(labels, known)], dtype=bool
            ),
            "tokens_consistent": pd.Series(
                [0 <= r["filtered_tokens"] <= r["total_tokens"] for r in labels], dtype=bool
            ),
            "path_consistent": pd.Series(
                [r["path_found"] == bool(r["kept_triplet_ids"]) for r in labels], dtype=bool
            ),
            "fa_ratio": pd.Series([r["fa_ratio"] for r in labels], dtype=float),
        }
    )


def labels_specs(
    trajectories: Sequence[Mapping],
    labels: Sequence[Mapping],
    modes: Sequence[str],
    target_modes: Sequence[str],
) -> list[SuiteSpec]:
    """The suite of the backtrace gate (see module doc)."""
    trajectory_count = len({t["trajectory_id"] for t in trajectories})
    return labels_suite(labels_frame(trajectories, labels), trajectory_count, modes, target_modes)


def labels_suite(
    frame: pd.DataFrame, trajectory_count: int, modes: Sequence[str], target_modes: Sequence[str]
) -> list[SuiteSpec]:
    """The gate over a labels frame (``labels_frame`` of the whole round, or of its batches
    concatenated: each batch's labels checked against the trajectories they came from)."""
    import great_expectations as gx

    E = gx.expectations
    expected_rows = trajectory_count * len(set(modes)) * len(set(target_modes))
    suite = [
        E.ExpectTableRowCountToEqual(value=expected_rows),
        E.ExpectColumnValuesToBeUnique(column="key"),
        E.ExpectColumnValuesToBeInSet(column="mode", value_set=sorted(set(modes))),
        E.ExpectColumnValuesToBeInSet(column="target_mode", value_set=sorted(set(target_modes))),
        E.ExpectColumnValuesToBeBetween(column="fa_ratio", min_value=0.0, max_value=1.0),
    ] + [
        E.ExpectColumnValuesToBeInSet(column=c, value_set=[True])
        for c in (
            "trajectory_known",
            "triplets_known",
            "pairs_known",
            "steps_known",
            "tokens_consistent",
            "path_consistent",
        )
    ]
    return [SuiteSpec("labels", frame, suite, ids=("key",))]  # a failure names the first offending labels
