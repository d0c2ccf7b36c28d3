"""A round's supervision set as the variants stage writes it: the batches in the set's order (earlier
rounds' examples first when sets accumulate, then this round's, a row group of trajectories at a time),
the files they go to (train.parquet and the OpenAI chat JSONL, written as the set is built; kept.parquet,
what the variant kept of each trajectory), the parametric trajectories left out, and the set's stats."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

from factory.causal.effects import parametric_exclusion
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import atomic_path, jsonl_line, write_json, write_jsonl
from factory.variants.kept import Selection
from factory.variants.sets import SetBuilder, check_new_ids, earlier_examples
from schemas import ParquetStream, iter_batches, read_rows, write_parquet

# The counts of a set without examples (a skipped round's metrics)
EMPTY_SET_COUNTS = {
    "trajectories": 0,
    "correct": 0,
    "examples": 0,
    "examples_in_set": 0,
    "accumulated_rounds": [],
}
log = logging.getLogger(__name__)


def parametric_left_out(trajectories: Sequence[Mapping], path: Path, command: str) -> tuple[set[str], dict]:
    """The correct trajectories the counterfactual rows at ``path`` flag parametric (closed-book answer
    correct), to leave out, and the counts for stats.json; ``command``: the one that writes ``path``."""
    if not path.exists():
        raise FactoryError(f"{path} is missing: variants.exclude_parametric needs `{command}` first")
    exclude, counts = parametric_exclusion(trajectories, read_rows(path))
    if counts["unknown_kept"]:
        log.warning(
            "variants: %d correct trajectories were not re-asked closed-book in %s (counterfactual."
            "max_trajectories or conditions): kept, parametric or not",
            counts["unknown_kept"],
            path,
        )
    return exclude, {"exclude_parametric": True, "source": str(path), **counts}


def set_batches(
    builder: SetBuilder, trajectories: Path, *, accumulate: bool, protocol_seed: int
) -> Iterator[tuple[list[dict], list[dict] | None]]:
    """(examples, the trajectories they come from) in the set's order: with ``accumulate`` the earlier
    rounds' own examples first (trajectories None), then this round's from the correct trajectories of
    the file ``trajectories``, a row group at a time; a reused example id is an error."""
    seen: set[str] = set()
    if accumulate:
        for _, batch in earlier_examples(builder.variant, builder.round, protocol_seed):
            seen.update(e["example_id"] for e in batch)
            yield batch, None
    for batch in iter_batches(trajectories, where={"correct": [True]}):
        rows = batch.to_pylist()
        examples = builder.add(rows)
        check_new_ids(examples, seen, builder.variant, builder.round)
        yield examples, rows


class SetFiles:
    """train.parquet (``schemas.SUPERVISION``) and train.jsonl (``{"messages": ...}`` per line) of a set
    in ``out_dir``, written a batch at a time (``add``) and published when the block ends without an
    error (with the stage's other outputs)."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self._rows = 0

    def __enter__(self) -> SetFiles:
        with ExitStack() as stack:
            jsonl_tmp = stack.enter_context(atomic_path(self.out_dir / "train.jsonl"))
            self._jsonl = stack.enter_context(open(jsonl_tmp, "w", encoding="utf-8"))
            self._table = stack.enter_context(ParquetStream(self.out_dir / "train.parquet", "supervision"))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc) -> bool:
        return self._stack.__exit__(*exc)

    @property
    def rows(self) -> int:
        """Examples written so far (the parquet stream counts only the row groups it has flushed)."""
        return self._rows

    def add(self, examples: list[dict]) -> None:
        self._table.write_rows(examples)
        self._jsonl.writelines(jsonl_line({"messages": e["messages"]}) for e in examples)
        self._rows += len(examples)


def selection_rows(variant: str, kept: Mapping[str, Selection]) -> list[dict]:
    """``schemas.KEPT`` rows: what ``variant`` kept of each trajectory of ``kept`` (trajectory id ->
    ``Selection``), sorted by trajectory id."""
    return [
        {
            "trajectory_id": tid,
            "variant": variant,
            "kept_triplet_ids": list(k.triplet_ids),
            "kept_pair_ids": list(k.pair_ids),
            "kept_step_indices": list(k.step_indices),
            "removed_pairs": k.removed_pairs,
            "removed_triplets": k.removed_triplets,
        }
        for tid, k in sorted(kept.items())
    ]


def write_selections(out_dir: Path, variant: str, kept: Mapping[str, Selection]) -> None:
    """kept.parquet in ``out_dir`` (``selection_rows``): the TRACE export reads this draw instead of drawing
    again."""
    write_parquet(selection_rows(variant, kept), out_dir / paths.KEPT, "kept")


def write_empty_set(out_dir: Path, variant: str, stats: dict) -> None:
    """The files of a set without examples (a skipped round), stats.json with ``stats``."""
    write_parquet([], out_dir / "train.parquet", "supervision")
    write_selections(out_dir, variant, {})
    write_jsonl(out_dir / "train.jsonl", [])
    write_json(out_dir / "stats.json", stats)


def set_stats(
    head: dict,
    builder: SetBuilder,
    outcomes: Sequence[Mapping],
    left_out: dict,
    rows: int,
    rounds: list[int],
    expectations_passed: int,
) -> dict:
    """stats.json (and the stage's metrics): ``head``, the builder's accounting over the round's
    ``outcomes`` (every trajectory, correct or not), the rows in the set and the rounds they are from."""
    built = builder.stats(len(outcomes), Counter(t["policy"] for t in outcomes))
    stats = {
        **head,
        **built,
        "parametric": left_out,
        "status": "ok" if rows else "empty",
        "examples_in_set": rows,
        "accumulated_rounds": rounds,
        "expectations_passed": expectations_passed,
    }
    if not built["correct"]:
        stats["reason"] = "no correct trajectory in this round"
    return stats


def log_set(label: str, stats: Mapping) -> None:
    log.info(
        "%s: %d correct of %d trajectories -> %d examples (%d in the set, rounds %s); units kept %d/%d; "
        "FA %.3f",
        label,
        stats["correct"],
        stats["trajectories"],
        stats["examples"],
        stats["examples_in_set"],
        stats["accumulated_rounds"],
        stats["units"]["kept"],
        stats["units"]["total"],
        stats["fa_ratio"],
    )
