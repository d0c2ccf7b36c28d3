"""Blocks of README.md and docs/*.md that quote what a `factory` command prints, kept true.

A block is a marker line ``<!-- output of `factory ARGS` -->`` followed by a fenced block (``` ... ```)
or by markdown lines up to the next blank line (a table). tests/test_docs.py runs each command in
process and compares; ``python -m tests.docs_output`` (``make docs``) rewrites every block with what
the command prints today.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- output of `factory (?P<args>[^`]+)` -->\s*$")


@dataclass
class Block:
    doc: Path
    line: int  # 1-based line of the marker
    args: list[str]
    start: int  # 0-based index of the block's first content line
    end: int  # 0-based index one past its last content line
    fenced: bool

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    lines = doc.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        match = MARKER.match(line)
        if not match:
            continue
        fenced = i + 1 < len(lines) and lines[i + 1].startswith("```")
        start = i + 2 if fenced else i + 1
        end = start
        while end < len(lines) and (not lines[end].startswith("```") if fenced else lines[end].strip()):
            end += 1
        found.append(Block(doc, i + 1, shlex.split(match.group("args")), start, end, fenced))
    return found


def output(args: list[str]) -> str:
    """What `factory ARGS` prints on stdout, run in this process."""
    from factory.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(args)
    if code != 0:
        raise RuntimeError(f"factory {' '.join(args)} exited {code}")
    return out.getvalue()


def quoted(block: Block) -> str:
    lines = block.doc.read_text(encoding="utf-8").splitlines()
    return "\n".join(lines[block.start : block.end]) + "\n"


def rewrite(doc: Path) -> bool:
    """Replace every block of ``doc`` with its command's output; True when the file changed."""
    text = doc.read_text(encoding="utf-8")
    lines = text.splitlines()
    for block in reversed(blocks(doc)):
        lines[block.start : block.end] = output(block.args).rstrip("\n").splitlines()
    new = "\n".join(lines) + "\n"
    if new != text:
        doc.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    changed = [str(doc.relative_to(ROOT)) for doc in DOCS if rewrite(doc)]
    print("rewrote " + ", ".join(changed) if changed else "every quoted output is current", file=sys.stderr)
