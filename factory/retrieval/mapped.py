"""Read-only memory-mapped files whose pages a long run gives back now and then.

The index and the passage store are mapped, not read: the operating system reads only the pages a
lookup touches, and every process that maps the same file shares those pages in the page cache.
But a mapped page a process has touched counts in its RSS until it unmaps it, so a stage that looks
up passages all over a 3M-passage store for an hour would grow to the size of the store.
``Mapping.touched`` counts lookups; every ``RELEASE_EVERY`` of them it tells the kernel
(``madvise(MADV_DONTNEED)``) that this process no longer needs the pages: they leave its RSS, stay in
the page cache (clean file pages, nothing is written), and a later lookup maps them again with a
minor fault. Memory then follows the lookups between two releases, not the corpus.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pyarrow as pa

RELEASE_EVERY = 8192  # lookups between releases


class Mappings:
    """The mapped files of one store or index, and the release of their pages."""

    def __init__(self) -> None:
        self._maps: list[mmap.mmap] = []
        self._since = 0

    def _map(self, path: Path) -> mmap.mmap:
        with open(path, "rb") as fh:  # the mapping outlives the file object
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self._maps.append(mapped)
        return mapped

    def npy(self, path: str | Path) -> np.ndarray:
        """A ``.npy`` file as an array over its mapping (what ``np.load(mmap_mode="r")`` gives, as a
        plain ndarray: a slice of an ``np.memmap`` costs a subclass instance on every lookup)."""
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read(fh)
            offset = fh.tell()
        count = int(np.prod(shape))
        if count == 0:
            return np.zeros(shape, dtype=dtype)
        return np.ndarray(
            shape, dtype=dtype, buffer=self._map(Path(path)), offset=offset, order="F" if fortran else "C"
        )

    def arrow(self, path: str | Path) -> pa.Table:
        """An Arrow IPC file as a table over its mapping (zero-copy)."""
        return pa.ipc.open_file(pa.py_buffer(self._map(Path(path)))).read_all()

    def touched(self, n: int = 1) -> None:
        """Count ``n`` lookups; give the pages back every ``RELEASE_EVERY``."""
        self._since += n
        if self._since >= RELEASE_EVERY:
            self.release()

    def release(self) -> None:
        """Drop every mapped page from this process's memory (they stay in the page cache)."""
        self._since = 0
        advice = getattr(mmap, "MADV_DONTNEED", None)
        if advice is None:  # not Linux/macOS: the pages stay mapped
            return
        for mapped in self._maps:
            mapped.madvise(advice)
