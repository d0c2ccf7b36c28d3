"""One round of a variant's chain as the round stages see it: where its artifacts are, the branch for
a round that does not run, and its metrics file. Not a stage (no ``COMMAND``): the round stages
(trajectories, backtrace, counterfactual, variants, export-trace, train, evaluate) share it.

DVC cannot stop a loop (``factory.bootstrap.rounds``): a round after its chain's stop decision still
runs every stage. ``stop_reason`` says why it must not run; the stages that read the round's
trajectories see an empty file, and ``empty_reason`` says why (the decision's reason when one was
recorded). Either way ``skip`` writes the stage's outputs empty and its metrics with the status
(``skipped``) and the reason, and logs one line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factory.bootstrap.rounds import skip_reason
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import write_json
from schemas import read_round_input, require, write_parquet

SKIPPED = "skipped"
EMPTY_TRAJECTORIES = "the round's trajectory file is empty"
log = logging.getLogger(__name__)


class Round:
    """Round ``round`` of ``variant``'s chain under protocol seed ``seed``, for the stage ``command``.

    ``metrics_path``: the stage's metrics file (default metrics/<command>/<variant>/seed_<s>/round_<r>.json);
    ``note``: added to the log line's parenthesis (e.g. the split); ``writes_metrics``: False on the
    ranks of a distributed run that write nothing (only rank 0 does).
    """

    def __init__(
        self,
        command: str,
        variant: str,
        round_: int,
        seed: int = 0,
        *,
        metrics_path: Path | None = None,
        note: str = "",
        writes_metrics: bool = True,
    ):
        self.command, self.variant, self.round, self.seed = command, variant, round_, seed
        self.metrics_path = metrics_path or paths.stage_metrics(command, variant, round_, seed)
        self.label = f"{command} {variant} round {round_} (seed {seed}{', ' + note if note else ''})"
        self.writes_metrics = writes_metrics

    # The round's artifacts (factory.utils.paths), read or written by the round stages.
    @property
    def trajectories(self) -> Path:
        return paths.trajectories(self.variant, self.round, self.seed)

    @property
    def labels(self) -> Path:
        return paths.labels(self.variant, self.round, self.seed)

    @property
    def counterfactual(self) -> Path:
        return paths.counterfactual(self.variant, self.round, self.seed)

    @property
    def supervision_dir(self) -> Path:
        return paths.supervision_dir(self.variant, self.round, self.seed)

    @property
    def trace_dir(self) -> Path:
        return paths.trace_dir(self.variant, self.round, self.seed)

    @property
    def run_id(self) -> str:
        """'<variant>/seed_<s>/round_<r>': the round's name in checkpoints and progress."""
        return f"{self.variant}/seed_{self.seed}/round_{self.round}"

    def head(self, seed_key: str = "seed", **fields: Any) -> dict:
        """The first keys of the stage's metrics: variant, round, the protocol seed under ``seed_key``,
        then ``fields``."""
        return {"variant": self.variant, "round": self.round, seed_key: self.seed, **fields}

    @property
    def args(self) -> str:
        """'--variant V --round R --seed S': the round's options of a command."""
        return f"--variant {self.variant} --round {self.round} --seed {self.seed}"

    def require(self, path: Path, producer: str) -> Path:
        """``path``, or (missing) an error naming ``factory <producer>`` for this round, as ``read`` does."""
        return require(path, f"run `factory {producer} {self.args}` first")

    def read(self, path: Path, producer: str, columns: list[str] | None = None, where=None) -> list[dict]:
        """Rows of the round's artifact ``path`` (``schemas.read_round_input``); missing, an error naming
        ``factory <producer>`` for this round."""
        return read_round_input(path, producer, self.variant, self.round, self.seed, columns, where)

    def stop_reason(self) -> str | None:
        """Why the chain's decision before this round says it must not run, or None (the base model's
        evaluation always runs); no decision recorded is an error naming the command to run."""
        return skip_reason(self.variant, self.round, self.seed)

    def empty_reason(self) -> str:
        """Why the round's trajectory file is empty: the stop decision's reason, else that it is empty
        (no decision recorded: the trajectories stage simply produced nothing)."""
        return self.recorded_stop() or EMPTY_TRAJECTORIES

    def recorded_stop(self) -> str | None:
        """``stop_reason``, or None also when no decision is recorded."""
        try:
            return self.stop_reason()
        except FactoryError:
            return None

    def skip(
        self,
        head: dict,
        reason: str,
        write_empty: Callable[[dict], object],
        *,
        status: str = SKIPPED,
        **counts: Any,
    ) -> dict:
        """The round does not run: ``write_empty(metrics)`` writes the stage's outputs empty, the metrics
        (``head``, ``status``, ``reason``, ``counts``: the stage's zero counts) are written, one line is
        logged. Returns the metrics."""
        metrics = {**head, "status": status, "reason": reason, **counts}
        write_empty(metrics)
        self.write_metrics(metrics)
        log.info("%s: %s (%s)", self.label, status, reason)
        return metrics

    def write_metrics(self, metrics: dict) -> dict:
        """The stage's metrics file (``write_json``: sorted keys, rounded floats); returns ``metrics``."""
        if self.writes_metrics:
            write_json(self.metrics_path, metrics)
        return metrics


def empty_parquet(path: Path, contract: str) -> Callable[[dict], object]:
    """``Round.skip``'s ``write_empty`` for a stage whose output is one parquet file: the file, no rows."""
    return lambda _metrics: write_parquet([], path, contract)
