"""Errors that carry a human message; the CLI prints them as one paragraph (traceback only with --debug)."""

from __future__ import annotations

import errno
import re


class FactoryError(Exception):
    """A failure the user can act on: bad input, bad parameters, a failed quality gate."""


class BadRecord(FactoryError):
    """One input record is malformed; says which record and which field."""

    def __init__(self, dataset: str, record_id: str, field: str, reason: str, where: str = ""):
        self.dataset, self.record_id, self.field, self.reason, self.where = (
            dataset,
            record_id,
            field,
            reason,
            where,
        )
        loc = f" ({where})" if where else ""
        super().__init__(f"{dataset} record {record_id!r}{loc}: field {field!r}: {reason}")

    def as_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "id": self.record_id,
            "field": self.field,
            "reason": self.reason,
            "where": self.where,
        }


# What to do about an operating-system error, by its errno: the causes a user can foresee and fix.
_OS_ADVICE = {
    errno.ENOSPC: "the disk is full: free space on it (or work on a larger disk) and re-run",
    errno.EDQUOT: "the disk quota is used up: free space (or raise the quota) and re-run",
    errno.EFBIG: "the file grew past what the file system allows: work on another file system and re-run",
    errno.EACCES: "permission denied: make it readable/writable for this user, or work in a folder you own",
    errno.EPERM: "operation not permitted: make it writable for this user, or work in a folder you own",
    errno.EROFS: "the file system is read-only: work in a writable folder",
    errno.ENOENT: "it does not exist: check the path (relative paths start at the folder factory runs in)",
    errno.EISDIR: "it is a folder where a file is expected: move the folder away",
    errno.ENOTDIR: "a part of the path is a file where a folder is expected: move that file away",
    errno.EEXIST: "a file is in the way where a folder is expected: move that file away",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n) and re-run",
    errno.EIO: "an input/output error of the device: check the disk",
}


def os_error_message(exc: OSError) -> str:
    """An operating-system error in words: the path, what happened and what to do. Arrow's errors
    carry their errno in the message only (``[errno 28] ...``)."""
    text = exc.strerror or " ".join(map(str, exc.args))  # str(exc) hides a message-only error's text
    code = exc.errno
    if code is None:
        match = re.search(r"\[errno (\d+)\]", text, re.IGNORECASE)
        code = int(match.group(1)) if match else None
    path = exc.filename or (re.search(r"'([^']+)'", text) or [None, None])[1]
    if path:  # an output's temporary (factory.utils.io.atomic_path) by the output's name
        path = re.sub(r"(^|/)\.([^/]+)\.tmp-\d+$", r"\1\2", str(path))
    where = f"{path}: " if path else ""
    return f"{where}{_OS_ADVICE.get(code) or text}"
