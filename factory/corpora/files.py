"""Reading a corpus file by what it is, not by its name: one JSON document or JSON Lines, plain or
compressed, with or without a byte-order mark.

``read_json_records`` yields ``(location, record)`` for every record. What the bytes are is decided by
parsing them: a file that is one JSON list holds one record per item; a file of one JSON object per
line is JSON Lines; a file that is one JSON object is a record if it has an id (``_id``/``id``) and a
wrapped list (``{"data": [...]}``) otherwise, refused with its top-level keys. A UTF-8 byte-order mark
is skipped; gzip, bz2 and xz files are read through a decompressed temporary copy; other archives and
UTF-16/32 text are refused by name. A record whose own bytes are bad (invalid UTF-8, a JSON Lines line
that does not parse) is yielded as ``Unreadable``, naming the byte offset, for the quarantine: one bad
record never costs the others. What cannot be split into records at all (a truncated JSON list) is a
``FactoryError`` naming the line, column and byte offset.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import mmap
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np

from factory.utils.errors import FactoryError

UTF8_BOM = b"\xef\xbb\xbf"
_OTHER_BOMS = {  # longest first: the UTF-32 LE mark begins with the UTF-16 LE one
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}
_COMPRESSED = {
    b"\x1f\x8b": ("gzip", gzip.open),
    b"BZh": ("bz2", bz2.open),
    b"\xfd7zXZ\x00": ("xz", lzma.open),
}
_ARCHIVES = {
    b"PK\x03\x04": "a zip archive",
    b"\x28\xb5\x2f\xfd": "zstd-compressed",
    b"ustar": "a tar archive",
}
ID_KEYS = ("_id", "id")  # a lone JSON object with one of these is a record, without them a wrapper
_NON_SPACE = re.compile(rb"\S")
_RELEASE_EVERY = 4096  # records between giving the mapping's pages back


class Unreadable(NamedTuple):
    """A record whose bytes cannot be decoded: what ingest quarantines in its place."""

    field: str  # "<bytes>" (not UTF-8) or "<line>" (a JSON Lines line that is not JSON)
    reason: str
    record_id: str = "?"  # when the id could still be read


def read_json_records(
    path: str | Path,
    record_type: type | None = None,
    id_keys: tuple[str, ...] = ID_KEYS,
    setting: str = "corpora.*",
) -> Iterator[tuple[str, Any]]:
    """Yield (location, record) from a corpus file; see the module docstring for what is accepted.

    A JSON list is mapped, not read, and split into its records' raw bytes in one C pass (msgspec
    ``Raw``: views into the mapping, no objects built); each record is then decoded alone, so memory
    holds one record at a time, and the mapping's pages are given back as the records are consumed
    (a 566 MB HotpotQA file does not sit in memory). With ``record_type`` (a ``msgspec.Struct`` of
    the official format) a record is decoded typed, every field's type checked in C; a record that
    does not fit the type is decoded untyped, and the builder checks it field by field and names
    what is wrong. JSON Lines are read a line at a time. ``id_keys``: the keys that make a lone JSON
    object a record (a one-record file); ``setting``: the params key that names the file, in messages.
    """
    path = Path(path)
    data, start, label = _content(path)
    first = _NON_SPACE.search(data, start)
    if first is None:
        return  # nothing but white space: an empty file (ingest reports it)
    char = data[first.start() : first.start() + 1]
    if char == b"[":
        yield from _json_list(path, label, data, start, record_type)
    elif char == b"{":
        yield from _object_or_lines(path, label, data, start, id_keys, setting)
    else:
        raise FactoryError(
            f"{label}: not a corpus file: it starts with {char!r} at byte offset {first.start()}, where a "
            f"JSON list of records ('[') or JSON Lines ('{{' on every line) should begin. Point {setting} at "
            "the dataset's JSON or JSONL file."
        )


def empty_reason(path: str | Path) -> str:
    """Why a file that yielded no record is empty, for the log and metrics/ingest.json."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        size = None
    return "0 bytes" if size == 0 else "no records"


def check_file(path: Path) -> None:
    """A ``FactoryError`` naming the path when it is not a readable regular file."""
    where = "" if path.is_absolute() else f" (relative to {Path.cwd()})"
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FactoryError(
            f"corpus file {path} does not exist{where}: check corpora.* in params.yaml"
        ) from None
    except OSError as exc:
        raise _unreadable(path, exc) from None
    if stat.S_ISDIR(mode):
        raise FactoryError(
            f"corpus file {path} is a folder, not a file: list the JSON/JSONL files inside it under "
            "corpora.* in params.yaml"
        )
    if not stat.S_ISREG(mode):
        raise FactoryError(
            f"corpus file {path} is not a regular file (a pipe or a device): copy it to a file"
        )


def _unreadable(path: Path, exc: OSError) -> FactoryError:
    why = "permission denied (check its permissions)" if isinstance(exc, PermissionError) else exc.strerror
    return FactoryError(f"cannot read corpus file {path}: {why or exc}")


def _content(path: Path) -> tuple[Any, int, str]:
    """The file's bytes mapped (a compressed file's decompressed copy; ``b""`` when there are none),
    where the text starts (after a UTF-8 byte-order mark) and how errors name the file. The mapping is
    never closed here: typed records keep raw views into it (``PassagePool.raw``); it goes with the
    last of them."""
    check_file(path)
    data, label = _mapped(path)
    return data, (len(UTF8_BOM) if data[:3] == UTF8_BOM else 0), label


def _mapped(path: Path) -> tuple[Any, str]:
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
            fh.seek(257)
            tar = fh.read(5)  # where a tar archive says "ustar"
            compressed = next((c for magic, c in _COMPRESSED.items() if head.startswith(magic)), None)
            if compressed is None:
                _refuse_other(str(path), head, tar)
                return (mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if head else b""), str(path)
        kind, opener = compressed
        label = f"{path} (decompressed {kind})"
        data = _decompressed(path, kind, opener)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    if data:
        _refuse_other(label, data[:8], data[257:262])
    return data, label


def _refuse_other(label: str, head: bytes, tar: bytes) -> None:
    for magic, what in _ARCHIVES.items():
        if head.startswith(magic) or (magic == b"ustar" and tar == magic):
            raise FactoryError(
                f"{label} is {what}, which ingest does not unpack: extract the JSON/JSONL file and list it "
                "under corpora.* (gzip, bz2 and xz files are read as they are)"
            )
    for bom, encoding in _OTHER_BOMS.items():
        if head.startswith(bom):
            raise FactoryError(
                f"{label} is {encoding} text (it starts with a {encoding} byte-order mark): re-save it as "
                "UTF-8, e.g. `iconv -f UTF-16 -t UTF-8`"
            )


def _decompressed(path: Path, kind: str, opener) -> Any:
    """The decompressed bytes in an anonymous temporary file, mapped (memory stays one page cache)."""
    with tempfile.TemporaryFile(prefix="factory-corpus-") as tmp:
        try:
            with opener(path, "rb") as src:
                shutil.copyfileobj(src, tmp, 1 << 20)
        except (EOFError, OSError, lzma.LZMAError) as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise  # the disk, not the data (a full temporary folder): named by the caller
            raise FactoryError(
                f"{path}: the {kind} data is corrupt or cut short ({exc}): download or compress the file "
                "again"
            ) from None
        tmp.flush()
        if not tmp.tell():
            return b""
        return mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ)  # the mapping outlives the file


def _json_list(path: Path, label: str, data: Any, start: int, record_type: type | None) -> Iterator:
    try:
        raws = msgspec.json.decode(memoryview(data)[start:], type=list[msgspec.Raw])
    except msgspec.DecodeError as exc:
        raise FactoryError(
            f"{label}: not valid JSON: {_locate(exc, data, start)}. The file cannot be split into records; "
            "fix or re-download it"
        ) from None
    release = getattr(mmap, "MADV_DONTNEED", None) if isinstance(data, mmap.mmap) else None
    typed = msgspec.json.Decoder(record_type) if record_type is not None else None
    for i, raw in enumerate(raws):
        if release is not None and i % _RELEASE_EVERY == 0:
            data.madvise(release)  # clean file pages: dropped from this process, re-read from the page cache
        record = None
        if typed is not None:
            try:
                record = typed.decode(raw)
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass  # a malformed record: the untyped path below names what is wrong
        if record is None:
            try:
                record = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                record = _bad_bytes(bytes(raw), _offset(raw, data))
        raws[i] = None  # the record's bytes are no longer needed
        yield f"{path.name}[{i}]", record


def _object_or_lines(
    path: Path, label: str, data: Any, start: int, id_keys: tuple[str, ...], setting: str
) -> Iterator:
    """A file that starts with '{': one JSON object (a record, or a wrapped list: refused) or JSON Lines."""
    whole, problem = None, ""
    try:
        whole = msgspec.json.decode(memoryview(data)[start:])
    except msgspec.DecodeError as exc:  # several documents (JSON Lines) or a broken one: the lines tell
        problem = _locate(exc, data, start)
    if isinstance(whole, dict):
        if not any(key in whole for key in id_keys):
            lists = [k for k, v in whole.items() if isinstance(v, list)]
            raise FactoryError(
                f"{label} holds one JSON object with the top-level keys {sorted(whole)[:12]}, not records: "
                + (f"the records seem to be the list under {lists[0]!r}. " if lists else "")
                + "Write the list of records alone to a file (a JSON list, or one record per line) and list "
                f"that file under {setting} (e.g. `jq '.data' in.json > out.json`)"
            )
        yield f"{path.name}:1", whole
        return
    yield from _lines(path, label, data, start, problem, setting)


def _lines(path: Path, label: str, data: mmap.mmap, start: int, problem: str, setting: str) -> Iterator:
    """JSON Lines: a line that is not JSON is yielded ``Unreadable``, unless it is the first record's,
    when the file is neither format (``problem``: why it is not one JSON document)."""
    data.seek(start)
    offset, lineno, seen = start, 0, False
    for line in iter(data.readline, b""):
        lineno += 1
        at, offset = offset, offset + len(line)
        if not line.strip():
            continue
        try:
            record = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            record = _bad_line(line, at, lineno, exc)
            if not seen and record.field == "<line>":
                raise FactoryError(
                    f"{label}: neither JSON Lines ({record.reason}) nor one JSON document ({problem}). "
                    f"Fix the file, or point {setting} at the dataset's JSON or JSONL file"
                ) from None
        seen = True
        yield f"{path.name}:{lineno}", record


def _bad_line(line: bytes, at: int, lineno: int, exc: msgspec.DecodeError) -> Unreadable:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return _bad_bytes(line, at)
    match = re.search(r"byte (\d+)", str(exc))
    column = int(match.group(1)) + 1 if match else len(line.rstrip())
    return Unreadable(
        "<line>", f"line {lineno} is not valid JSON: {exc} (column {column}, byte offset {at + column - 1})"
    )


def _bad_bytes(raw: bytes, offset: int | None) -> Unreadable:
    """A record with bytes that are not UTF-8: the offset of the first (in the file) and, when the rest
    of the record still parses, its id."""
    try:
        raw.decode("utf-8")
        return Unreadable("<bytes>", f"not valid JSON (byte offset {offset})")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1]
        where = (
            f"byte offset {offset + exc.start}" if offset is not None else f"byte {exc.start} of the record"
        )
    record_id = "?"
    try:
        record = msgspec.json.decode(raw.decode("utf-8", "replace").encode())
        if isinstance(record, dict):
            record_id = str(next((record[k] for k in ID_KEYS if k in record), "?"))
    except msgspec.DecodeError:
        pass
    return Unreadable(
        "<bytes>",
        f"invalid UTF-8 at {where} (byte 0x{bad.hex()}): the file is not UTF-8 there; re-encode it as UTF-8",
        record_id,
    )


def _offset(raw: msgspec.Raw, data: Any) -> int | None:
    """Where a record's raw bytes (a view into ``data``) start in the file."""
    try:
        return int(np.frombuffer(raw, np.uint8).ctypes.data - np.frombuffer(data, np.uint8).ctypes.data)
    except (TypeError, ValueError):
        return None


def _locate(exc: msgspec.DecodeError, data: Any, start: int) -> str:
    """msgspec's message with the line, the column and the byte offset in the file."""
    match = re.search(r"byte (\d+)", str(exc))
    if not match:
        return f"{exc} (the data ends inside a value: is the file cut short?)"
    offset = int(match.group(1)) + start
    line = data[:offset].count(b"\n") + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"{exc} (line {line}, column {col}, byte offset {offset})"
