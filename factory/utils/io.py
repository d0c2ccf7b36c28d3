"""Small file helpers: atomic writes of files and folders, a stage's outputs published together,
deterministic JSON/JSONL, progress bars."""

from __future__ import annotations

import gc
import glob
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from factory.utils.errors import FactoryError, os_error_message


def _round_floats(value: Any, digits: int = 6) -> Any:
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: _round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_round_floats(v, digits) for v in value]
    return value


def remove(path: Path) -> None:
    """Remove a file or a folder, if it is there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


class _Outputs:
    """What one stage run has written so far: each output's finished temporary, by its path."""

    def __init__(self) -> None:
        self.pending: dict[Path, Path] = {}  # absolute output path -> its temporary, in write order
        self.temporaries: set[Path] = set()  # every temporary held (being written or pending)
        self.after: list[tuple[Callable, tuple]] = []

    def inside_temporary(self, path: Path) -> bool:
        return any(tmp == path or tmp in path.parents for tmp in self.temporaries)

    def commit(self) -> None:
        done = 0
        for path, tmp in self.pending.items():
            try:
                _publish(tmp, path)
            except OSError as exc:
                self.discard()
                raise FactoryError(
                    f"publishing the stage's outputs failed at {os_error_message(exc)}; {done} of "
                    f"{len(self.pending)} were published before it, the others not: re-run the stage"
                ) from None
            done += 1
        self.pending.clear()
        for action, args in self.after:
            action(*args)

    def discard(self) -> None:
        for tmp in self.temporaries:
            remove(tmp)
        self.pending.clear()


_current: _Outputs | None = None  # the stage run being written (one per process: stages run one at a time)
_immediate = 0  # > 0: writes of work state (checkpoints), published at once even inside a stage run


@contextmanager
def outputs_together() -> Iterator[None]:
    """Every output written inside (through ``atomic_path``: ``write_json``, ``write_parquet``, ...)
    is published when the block ends without an error, all together, and none of them when it ends
    with one: a stage's data, metrics and plots change together or not at all. Until then each output
    waits under its temporary name, and reading it back (``schemas.read``, ``read_json``) reads that
    (``pending``). A nested block joins the outer one. Used as ``@outputs_together()`` on every
    stage's ``run``."""
    global _current
    if _current is not None:
        yield
        return
    _current = outputs = _Outputs()
    try:
        yield
    except BaseException:
        _current = None
        outputs.discard()
        raise
    _current = None
    outputs.commit()


@contextmanager
def immediate() -> Iterator[None]:
    """Writes inside are published at once, also inside ``outputs_together``: for checkpoints, the
    work state a re-run resumes from, which must be on disk whatever happens to the run."""
    global _immediate
    _immediate += 1
    try:
        yield
    finally:
        _immediate -= 1


def after_publishing(action: Callable, *args) -> None:
    """``action(*args)`` once the outputs are published (at once outside ``outputs_together``;
    never if the run fails): e.g. removing the checkpoint an output was assembled from."""
    if _current is None:
        action(*args)
    else:
        _current.after.append((action, args))


def pending(path: str | Path) -> Path:
    """Where ``path`` can be read now: its temporary while it waits to be published with the rest of
    the stage's outputs, else the path itself."""
    if _current is None or not _current.pending:
        return Path(path)
    return _current.pending.get(Path(path).absolute(), Path(path))


def output_folder(path: str | Path) -> Path:
    """A new temporary folder for the output folder ``path``, for code that writes where it is told
    (a trainer, DVCLive): inside ``outputs_together`` it is published with the stage's other outputs
    (or removed with them); outside, ``path`` itself is emptied and returned."""
    path = Path(path)
    if _current is None:
        remove(path)
        path.mkdir(parents=True)
        return path
    tmp = _temporary(path)
    tmp.mkdir()
    _current.temporaries.add(tmp.absolute())
    _current.pending[path.absolute()] = tmp.absolute()
    return tmp


def _temporary(path: Path) -> Path:
    """``.<name>.tmp-<pid>`` next to ``path``, once what earlier (killed) writers left there is gone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for kind in ("tmp", "old"):
        for stale in path.parent.glob(f".{glob.escape(path.name)}.{kind}-*"):
            remove(stale)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _publish(tmp: Path, path: Path) -> None:
    """``tmp`` takes the place of ``path``; a folder replaces an old one in two renames (old aside,
    new in): killed between them, the path is missing, never half-written."""
    if tmp.is_dir() and path.is_dir():
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        os.replace(path, old)
        os.replace(tmp, path)
        remove(old)
    else:
        os.replace(tmp, path)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A hidden temporary path next to ``path`` (``.<name>.tmp-<pid>``) to write a file or a folder
    into; when the block ends without an error it takes the place of ``path`` by rename (inside
    ``outputs_together``: when the stage's outputs are published), and on an error it is removed. A
    process killed at any moment therefore leaves the old output or none, never a partial one under
    the real name; the temporaries a killed writer left are removed here, on the next write of the
    same path."""
    path = Path(path)
    tmp = _temporary(path)
    outputs = _current
    # inside another output's temporary (a folder being built), or work state: published at once
    if outputs is not None and (_immediate or outputs.inside_temporary(path.absolute())):
        outputs = None
    if outputs is not None:
        outputs.temporaries.add(tmp.absolute())
    try:
        yield tmp
    except BaseException:
        remove(tmp)
        if outputs is not None:
            outputs.temporaries.discard(tmp.absolute())
        raise
    if outputs is None:
        _publish(tmp, path)
    else:
        outputs.pending.pop(path.absolute(), None)  # written twice: the last one counts, in its place
        outputs.pending[path.absolute()] = tmp.absolute()


@contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """An ``OSError`` raised inside that names no file (a write on a full disk, Arrow's errors) gets
    ``path``, the output being written, so that the message can say which."""
    try:
        yield
    except OSError as exc:
        if not exc.filename:
            exc.filename = str(path)
        raise


def write_text(path: str | Path, text: str) -> Path:
    """Write atomically (tmp + rename), creating parent folders."""
    with atomic_path(path) as tmp, naming(path):
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: str | Path, data: Any) -> Path:
    """Metrics/report JSON: sorted keys, floats rounded to 6 digits, so reruns compare byte for byte."""
    return write_text(
        path, json.dumps(_round_floats(data), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    )


def jsonl_line(row: dict) -> str:
    """One JSONL line: sorted keys, UTF-8 as is."""
    return json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n"


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> Path:
    """One JSON object per line, streamed to the temporary file and renamed when whole."""
    with atomic_path(path) as tmp, naming(path), open(tmp, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(jsonl_line(r))
    return Path(path)


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in 4 MB blocks (the cards cite every corpus and evaluation file)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def read_json(path: str | Path) -> Any:
    """A JSON artifact (its temporary while the running stage has yet to publish it); one that is
    missing or not JSON (edited by hand, cut short) is a ``FactoryError`` naming the command that
    rewrites it."""
    try:
        return json.loads(pending(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        from factory.utils.paths import producer

        command = producer(path)[1]
        redo = f"`{command}` rewrites it" if command else "write it again"
        what = "is missing" if isinstance(exc, FileNotFoundError) else f"is not valid JSON ({exc})"
        raise FactoryError(f"{path} {what}: {redo}") from None


def read_jsonl(path: str | Path) -> Iterator[dict]:
    """The rows of a JSONL artifact; a line that is not JSON (a flipped byte, a file cut short) is a
    ``FactoryError`` naming the file and how to restore it (``damaged``)."""
    with open(pending(path), encoding="utf-8") as fh:
        for number, line in enumerate(_decoded(fh, path), 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise damaged(path, f"line {number} is not JSON: {exc}") from None


def _decoded(lines: Iterable[str], path: str | Path) -> Iterator[str]:
    try:
        yield from lines
    except UnicodeDecodeError as exc:
        raise damaged(path, f"not UTF-8 text: {exc}") from None


def damaged(path: str | Path, detail: object) -> FactoryError:
    """The error for a file of the run that cannot be decoded: it names the file and the ways to get it
    back. DVC keeps a copy of every output in its cache (``dvc checkout --force``: without --force DVC
    refuses to overwrite a changed file in a non-interactive shell); a remote is trusted unless it is set
    to verify (docs/full-scale.md#another-machine-gets-a-run); the producing command rewrites it."""
    from factory.utils.paths import producer

    command = producer(path)[1]
    redo = f"; or `{command}` rewrites it" if command else ""
    return FactoryError(
        f"{path} is damaged ({detail}): restore it with `dvc checkout --force {path}` (the copy in DVC's "
        f"cache), or `dvc pull --force {path}` from a remote that checks what it downloads (`dvc remote "
        f"modify <name> verify true`){redo}"
    )


@contextmanager
def loading_weights(model_dir: str | Path) -> Iterator[None]:
    """Around a ``from_pretrained`` of ``model_dir``: a safetensors file that cannot be decoded (cut
    short, a flipped byte in its header) is a ``damaged`` error naming that file."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - safetensors' Rust error class, matched by name below
        if type(exc).__name__ != "SafetensorError":
            raise
        raise damaged(_unreadable_weights(Path(model_dir)), exc) from None


def _unreadable_weights(model_dir: Path) -> Path:
    """The first ``*.safetensors`` in ``model_dir`` whose header does not open (the folder if all do)."""
    from safetensors import safe_open

    for f in sorted(model_dir.glob("*.safetensors")):
        try:
            with safe_open(f, framework="np"):
                pass
        except Exception:  # noqa: BLE001 - SafetensorError, or an OSError reading it
            return f
    return model_dir


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while building millions of small objects that form no
    cycles (parsed records, rows): its full collections otherwise dominate ingest time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def progress(
    iterable: Iterable | None = None,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    initial: int = 0,
):
    """A progress bar on stderr with counts, rate and ETA that redraws on its own (a new line every
    ~10 s when stderr is not a terminal): ``factory.utils.progress.Progress``."""
    from factory.utils.progress import BAR_FORMAT, UNBOUNDED_FORMAT, Progress

    return Progress(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        initial=initial,
        bar_format=BAR_FORMAT if total else UNBOUNDED_FORMAT,
    )
