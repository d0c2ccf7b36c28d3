"""Great Expectations (GX Core 1.x) suites that gate the stages.

A stage hands ``run_suites`` a few pandas frames and the expectations for each; a failing
expectation raises ``GateFailed`` with one readable line per failure (column, count, examples),
and the validation results are rendered as GX data docs (HTML) under ``reports/gx/<stage>/``, published
with the stage's other outputs when the gate passes; when it fails the outputs stay as they were and
the docs of the failed run are kept beside them, in ``reports/gx/<stage>.failed/``. A frame that names
its ``source`` (the file it checks) and ``ids`` (the columns that identify a row) has both in the
failure message, with the first offending rows.
Checks that span columns (e.g. "every supporting title is among the question's passages") are
computed as boolean columns by the suite builders and asserted with plain GX expectations.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factory.utils.errors import FactoryError
from factory.utils.io import after_publishing, atomic_path, remove

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
log = logging.getLogger(__name__)


class GateFailed(FactoryError):
    """A data-quality gate failed; the message lists every failed expectation."""


@dataclass
class SuiteSpec:
    """One frame and the expectations it must meet."""

    name: str
    frame: Any  # pandas.DataFrame
    # the expectations, or a function of GX's expectations module that builds them: called only when the
    # frame is validated, so a gate whose frames are all empty never imports GX (seconds a stage)
    expectations: list[Any] | Callable[[Any], list[Any]]
    source: str | None = None  # the file the frame's rows are, for the failure message
    ids: tuple[str, ...] = ()  # columns naming a row: a failure lists the first offending rows by them


@dataclass
class GateResult:
    success: bool
    failures: list[str]
    evaluated: int
    docs_index: str | None


def _describe(result: Any, spec: SuiteSpec) -> str:
    cfg = result.expectation_config
    kwargs = {k: v for k, v in cfg.kwargs.items() if k not in ("batch_id", "result_format")}
    column = kwargs.pop("column", None)
    res = result.result or {}
    count = res.get("unexpected_count")
    examples = res.get("partial_unexpected_list") or []
    what = f"{spec.name}.{column}" if column else spec.name
    if spec.source:
        what += f" ({spec.source})"
    detail = f"{count} unexpected" if count is not None else f"observed {res.get('observed_value')!r}"
    rows = res.get("partial_unexpected_index_list") or []
    if spec.ids and rows and isinstance(rows[0], dict):
        first = [
            str(row.get(spec.ids[0])) + "".join(f" ({row.get(c)})" for c in spec.ids[1:]) for row in rows[:3]
        ]
        values = f"; values {examples[:3]!r}" if examples and column not in spec.ids else ""
        shown = f"; first: {', '.join(first)}{values}"
    else:
        shown = f"; e.g. {examples[:3]!r}" if examples else ""
    extra = {k: v for k, v in kwargs.items() if k in ("value_set", "min_value", "max_value", "value")}
    return f"{what}: {cfg.type} {extra if extra else ''} failed ({detail}{shown})".replace("  ", " ")


class DocsSite:
    """The data docs of one gate, built in a temporary folder (``atomic_path``): published with the
    stage's outputs when the gate passes, moved to ``<stage>.failed`` beside them when it fails."""

    def __init__(self, docs_dir: str | Path, stage: str):
        self.site = Path(docs_dir) / stage
        self.failed = self.site.with_name(f"{self.site.name}.failed")
        self._atomic = atomic_path(self.site)
        self.tmp = self._atomic.__enter__()
        self._open = True

    def close(self, gate: GateResult | None) -> GateResult | None:
        """Publish (passed gate) or set aside (failed gate, or None: the gate did not run) the docs."""
        if not self._open:
            return gate
        self._open = False
        if gate is not None and not gate.failures:
            self._atomic.__exit__(None, None, None)
            after_publishing(remove, self.failed)  # the docs of an earlier failure are stale now
            gate.docs_index = str(self.site / "index.html") if gate.docs_index else None
            return gate
        if gate is not None and (self.tmp / "index.html").exists():
            remove(self.failed)
            self.tmp.rename(self.failed)
            gate.docs_index = str(self.failed / "index.html")
        error = GateFailed("the gate failed")
        try:
            self._atomic.__exit__(GateFailed, error, None)  # removes what is left of the temporary
        except GateFailed:
            pass
        return gate


def run_suites(
    stage: str,
    specs: list[SuiteSpec],
    docs_dir: str | Path | None = "reports/gx",
    raise_on_failure: bool = True,
) -> GateResult:
    """Validate each frame against its expectations; write data docs (``DocsSite``); raise on failure.

    Frames with no rows (a skipped or empty round) have nothing to check: the gate passes without
    starting Great Expectations (whose import alone costs seconds per stage).
    """
    if all(len(spec.frame) == 0 for spec in specs):
        log.info("%s: no rows to validate (%s)", stage, ", ".join(spec.name for spec in specs))
        return GateResult(success=True, failures=[], evaluated=0, docs_index=None)
    site = DocsSite(docs_dir, stage) if docs_dir is not None else None
    gate = None
    try:
        gate = validate(stage, specs, site.tmp if site else None)
    finally:
        if site is not None:
            site.close(gate)
    return check_gate(stage, gate) if raise_on_failure else gate


def validate(stage: str, specs: list[SuiteSpec], site_dir: Path | None) -> GateResult:
    """Run the suites of ``specs`` with Great Expectations, their data docs written to ``site_dir``."""
    import great_expectations as gx

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    ctx = gx.get_context(mode="ephemeral")
    try:
        ctx.variables.progress_bars = {"globally": False, "metric_calculations": False}
    except Exception:  # older/newer GX: progress bars are cosmetic
        pass
    docs_index = site_name = None
    if site_dir is not None:
        site_dir = Path(site_dir)
        shutil.rmtree(site_dir, ignore_errors=True)
        site_name = f"{stage}_docs"
        ctx.add_data_docs_site(
            site_name=site_name,
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(site_dir.resolve()),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
        docs_index = str(site_dir / "index.html")
    source = ctx.data_sources.add_pandas(f"{stage}_frames")
    definitions, frames = [], {}
    for spec in specs:
        asset = source.add_dataframe_asset(name=spec.name)
        batch = asset.add_batch_definition_whole_dataframe(f"{spec.name}_all")
        suite = ctx.suites.add(gx.ExpectationSuite(name=f"{stage}.{spec.name}"))
        expectations = spec.expectations
        for expectation in expectations(gx.expectations) if callable(expectations) else expectations:
            suite.add_expectation(expectation)
        definitions.append(
            ctx.validation_definitions.add(
                gx.ValidationDefinition(data=batch, suite=suite, name=f"{stage}.{spec.name}")
            )
        )
        frames[spec.name] = spec.frame
    failures: list[str] = []
    evaluated = 0
    # One checkpoint per frame: each validation definition needs its own dataframe batch parameter.
    for spec, definition in zip(specs, definitions, strict=True):
        # with ids, a failure lists the offending rows by them (GX adds them to each failed result)
        result_format = {"result_format": "SUMMARY", "unexpected_index_column_names": list(spec.ids)}
        checkpoint = ctx.checkpoints.add(
            gx.Checkpoint(
                name=f"{stage}.{spec.name}",
                validation_definitions=[definition],
                **({"result_format": result_format} if spec.ids else {}),
            )
        )
        outcome = checkpoint.run(batch_parameters={"dataframe": frames[spec.name]})
        for run_result in outcome.run_results.values():
            for result in run_result.results:
                evaluated += 1
                if not result.success:
                    failures.append(_describe(result, spec))
    if site_name is not None:
        # once, from the stored results (a docs action per checkpoint would render the site per frame)
        ctx.build_data_docs(site_names=[site_name])
    return GateResult(success=not failures, failures=failures, evaluated=evaluated, docs_index=docs_index)


def check_gate(stage: str, gate: GateResult) -> GateResult:
    """Raise ``GateFailed`` listing every failed expectation; log the pass otherwise."""
    if gate.failures:
        docs = f" Data docs of this run: {gate.docs_index}." if gate.docs_index else ""
        raise GateFailed(
            f"{stage}: {len(gate.failures)} of {gate.evaluated} expectations failed:\n  - "
            + "\n  - ".join(gate.failures)
            + docs
        )
    log.info(
        "%s: %d expectations passed%s",
        stage,
        gate.evaluated,
        f" (data docs: {gate.docs_index})" if gate.docs_index else "",
    )
    return gate


def _run_in_child(
    stage: str, expectations: str, frames: dict[str, Any], site_dir: str | None, sources: dict
) -> GateResult:
    module, _, name = expectations.partition(":")
    import great_expectations as gx
    import pandas as pd

    by_frame = getattr(importlib.import_module(module), name)(gx.expectations)
    specs = [
        SuiteSpec(
            frame_name, pd.DataFrame(frames[frame_name]), by_frame[frame_name], *sources.get(frame_name, ())
        )
        for frame_name in frames
    ]
    return validate(stage, specs, None if site_dir is None else Path(site_dir))


def _gate_child(conn: Any) -> None:
    """The child's whole life: import GX at once, then run the one gate it is sent. The task is
    received in a thread meanwhile, so that the parent never blocks on a full pipe."""
    import pickle
    import threading

    task: list = []

    def receive() -> None:
        # raw bytes only: unpickling the frames imports numpy, which must not run in this thread while
        # the main thread imports Great Expectations (and numpy) — a concurrent first import of numpy
        # fails with a partially initialised module
        try:
            task.append(conn.recv_bytes())
        except EOFError:  # the parent finished (or failed) without submitting
            pass

    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    import great_expectations  # noqa: F401  (the import alone takes seconds: done while the parent works)

    receiver.join()
    if not task:
        return
    try:
        conn.send(("ok", _run_in_child(*pickle.loads(task[0]))))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


class BackgroundGate:
    """Runs a gate in a child process that starts importing Great Expectations at once.

    For a big stage (ingest) the GX import and the data-docs rendering cost as much as the work
    being gated; in a child they overlap with the parent's parsing and table building. The child
    gets frames (pandas, or dicts of columns it turns into pandas) and the dotted name of a function
    ``expectations(E) -> {frame: [...]}`` (GX objects are built there, so the parent never imports GX).
    Once its result is in, the child is killed rather than waited for: tearing down an interpreter
    that loaded GX takes up to a second, and it has nothing left to do.
    """

    def __init__(self) -> None:
        import multiprocessing

        # spawn: the parent holds threads (progress bars, Arrow pools) that must not be forked
        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(target=_gate_child, args=(child_conn,), name="gx-gate", daemon=True)
        self._process.start()
        child_conn.close()
        self._stage: str | None = None
        self._docs: DocsSite | None = None

    def submit(
        self,
        stage: str,
        expectations: str,
        frames: dict[str, Any],
        docs_dir: str | Path | None = "reports/gx",
        sources: dict[str, tuple[str, tuple[str, ...]]] | None = None,
    ) -> None:
        """``sources``: frame name -> (the file it checks, the columns naming a row) for the message."""
        self._stage = stage
        self._docs = DocsSite(docs_dir, stage) if docs_dir is not None else None
        site = None if self._docs is None else str(self._docs.tmp.absolute())
        self._conn.send((stage, expectations, frames, site, sources or {}))

    def result(self) -> GateResult:
        """Wait for the submitted gate; raise ``GateFailed`` as ``run_suites`` would."""
        outcome = None
        try:
            try:
                status, outcome = self._conn.recv()
            except EOFError:
                self._process.join(timeout=10)
                raise FactoryError(
                    f"{self._stage}: the Great Expectations gate process exited without a result (exit "
                    f"code {self._process.exitcode})"
                ) from None
            if status != "ok":
                raise FactoryError(f"{self._stage}: the Great Expectations gate failed to run: {outcome}")
        finally:
            if self._docs is not None:
                self._docs.close(outcome if isinstance(outcome, GateResult) else None)
        return check_gate(self._stage, outcome)

    def __enter__(self) -> BackgroundGate:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._docs is not None:
            self._docs.close(None)
        self._conn.close()
        self._process.kill()
        self._process.join()
