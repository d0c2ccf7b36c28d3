"""The documentation holds together: README.md and docs/*.md link only to files and headings that exist,
name only `factory` commands and `make` targets that exist, name every stage and make target somewhere,
and every `docs/design.md §N` reference (in code or docs) names a section of docs/design.md.

Anchors are GitHub's: a heading's rendered text, lower-cased, with everything but letters, digits,
spaces, `-` and `_` removed and each space made a `-`; a repeated heading gets `-1`, `-2`, ...
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DESIGN = ROOT / "docs" / "design.md"
# where code cites the design: the package, its contracts and gates, the benchmarks, the tests, the build
CODE = [
    p
    for folder in ("factory", "schemas", "validators", "bench", "tests")
    for p in sorted((ROOT / folder).rglob("*.py"))
] + [ROOT / "Makefile", ROOT / "dvc.yaml", ROOT / "params.yaml", ROOT / "pyproject.toml"]

FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_ID = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
FACTORY_CMD = re.compile(r"(?<![\w.-])factory\s+([a-z][a-z0-9-]*)")
MAKE_CMD = re.compile(r"(?<![\w.-])make\s+((?:-\S+\s+)*)([a-z][\w-]*)")
DESIGN_REF = re.compile(r"docs/design\.md §(\d+)")
OLD_REF = re.compile("DES" + r"IGN(?: §|\.md)")  # the design document outside the repository, as once cited


# ---------------------------------------------------------------- reading markdown


def split_markdown(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]], list[str]]:
    """(lines, prose, code): the (line number, line) pairs outside fenced blocks as written, the same
    with inline code spans blanked (so a `[x](y)` written as code is no link), and the code texts
    (fenced blocks and inline spans)."""
    lines, prose, code, block, fence = [], [], [], [], None
    for n, line in enumerate(text.splitlines(), 1):
        marker = FENCE.match(line.strip())
        if fence is None and marker:
            fence, block = marker.group(1), []
        elif fence is not None and line.strip().startswith(fence):
            code.append("\n".join(block))
            fence = None
        elif fence is not None:
            block.append(line)
        else:
            code += [m.group(2) for m in INLINE_CODE.finditer(line)]
            lines.append((n, line))
            prose.append((n, INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)))
    return lines, prose, code


def heading_text(raw: str) -> str:
    """The rendered text of a heading's markdown: code spans, links, images and emphasis unwrapped."""
    text = INLINE_CODE.sub(lambda m: m.group(2), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("*", "")


def slug(text: str) -> str:
    text = heading_text(text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a markdown file offers: its headings' slugs (repeats numbered) and HTML ids."""
    lines, _, _ = split_markdown(path.read_text(encoding="utf-8"))
    seen: Counter = Counter()
    out = set()
    for _, line in lines:
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            out.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
        out.update(HTML_ID.findall(line))
    return out


def links(path: Path) -> list[tuple[int, str, str]]:
    """(line number, link text, target) of every link and image in the prose of a markdown file."""
    _, prose, _ = split_markdown(path.read_text(encoding="utf-8"))
    return [(n, m.group(1), m.group(2)) for n, line in prose for m in LINK.finditer(line)]


def broken_links(path: Path) -> list[str]:
    """Every relative link or #anchor of ``path`` that resolves to nothing, as 'file:line: target: why'."""
    problems = []
    for n, _, target in links(path):
        if SCHEME.match(target):
            continue  # http(s), mailto: not checked here
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(path.parent.parent) if path.parent != ROOT else path.name}:{n}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no file {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading with the anchor #{anchor} in {dest.name}")
        elif anchor and dest.suffix != ".md":
            problems.append(f"{where}: an anchor into a file that is not markdown")
    return problems


def named(pattern: re.Pattern, group: int) -> dict[str, list[str]]:
    """What the docs' code (fenced blocks and inline spans) names with ``pattern``: name -> where."""
    found: dict[str, list[str]] = {}
    for doc in DOCS:
        _, _, code = split_markdown(doc.read_text(encoding="utf-8"))
        for snippet in code:
            for m in pattern.finditer(snippet):
                found.setdefault(m.group(group), []).append(doc.name)
    return found


# ---------------------------------------------------------------- what exists


def commands() -> set[str]:
    """Every `factory` subcommand: the stages and the others the CLI has (`params`, `check-corpora`)."""
    import argparse

    from factory.cli import build_parser, stage_names

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(stage_names()) <= set(sub.choices)
    return set(sub.choices)


def make_targets() -> tuple[set[str], set[str]]:
    """(every target the Makefile defines, the .PHONY ones: the targets meant to be typed)."""
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z0-9][\w.-]*)\s*:(?!=)", text, re.MULTILINE))
    phony = {t for line in re.findall(r"^\.PHONY\s*:(.*)$", text, re.MULTILINE) for t in line.split()}
    return targets, phony


def design_sections() -> set[str]:
    return {m.group(1) for m in re.finditer(r"^## (\d+)\. ", DESIGN.read_text(), re.MULTILINE)}


# ---------------------------------------------------------------- the checks


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_relative_link_and_anchor_resolves(doc):
    assert not broken_links(doc)


def test_every_factory_command_the_docs_name_exists():
    unknown = {c: where for c, where in named(FACTORY_CMD, 1).items() if c not in commands()}
    assert not unknown, f"`factory <command>` the CLI does not have: {unknown}"


def test_every_make_target_the_docs_name_exists():
    targets, _ = make_targets()
    unknown = {t: where for t, where in named(MAKE_CMD, 2).items() if t not in targets}
    assert not unknown, f"`make <target>` the Makefile does not define: {unknown}"


def test_every_stage_and_make_target_is_named_in_the_docs():
    from factory.cli import stage_names

    stages = set(named(FACTORY_CMD, 1))
    assert not set(stage_names()) - stages, f"stages no doc names: {set(stage_names()) - stages}"
    _, phony = make_targets()
    targets = set(named(MAKE_CMD, 2))
    assert not phony - targets, f"make targets no doc names: {phony - targets}"


def test_design_references_name_sections_of_docs_design_md():
    sections = design_sections()
    assert sections == {str(n) for n in range(1, len(sections) + 1)}  # numbered 1..N, none skipped
    problems = []
    for path in CODE + DOCS:
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT)
        problems += [
            f"{rel}: cites the design outside the repository: {m.group(0)!r}" for m in OLD_REF.finditer(text)
        ]
        problems += [
            f"{rel}: docs/design.md §{n}: no such section"
            for n in DESIGN_REF.findall(text)
            if n not in sections
        ]
    for doc in DOCS:  # a link written "design §N" goes to section N
        for n, text, target in links(doc):
            cited = re.search(r"§(\d+)", text)
            if cited and "design.md#" in target and not target.split("#")[1].startswith(f"{cited.group(1)}-"):
                problems.append(f"{doc.name}:{n}: [{text}]({target}) links another section")
    assert not problems, "\n".join(problems)
    cited = {n for path in CODE for n in DESIGN_REF.findall(path.read_text(encoding="utf-8"))}
    assert cited, "no code cites docs/design.md: the check above would pass vacuously"


# ---------------------------------------------------------------- the checker finds what it looks for


def test_the_checker_finds_a_broken_link_a_missing_anchor_and_a_link_in_code_is_none(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## The `make demo` time: 20 min\n")
    doc = tmp_path / "docs" / "page.md"
    doc.write_text(
        "# Page\n\n"
        "[ok](other.md#the-make-demo-time-20-min) [ok too](#page) [gone](missing.md) "
        "[bad anchor](other.md#no-such-heading)\n\n"
        "`[not a link](nowhere.md)`\n\n```\n[also code](nowhere.md)\n```\n"
    )
    problems = broken_links(doc)
    assert len(problems) == 2
    assert problems[0].startswith("docs/page.md:3: missing.md: no file")
    assert "no heading with the anchor #no-such-heading in other.md" in problems[1]


def test_slugs_follow_github():
    assert slug("1. The trajectory (KnowTrace inference)") == "1-the-trajectory-knowtrace-inference"
    assert slug("(b) Hugging Face hub copies under `ingest.hf`") == "b-hugging-face-hub-copies-under-ingesthf"
    assert slug("The library's folders") == "the-librarys-folders"
    assert (
        slug("Size: one round at the size of the full corpora")
        == "size-one-round-at-the-size-of-the-full-corpora"
    )


# ---------------------------------------------------------------- what the docs quote is what the code says


def test_every_quoted_command_output_is_what_the_command_prints_today():
    from tests.docs_output import DOCS as QUOTING
    from tests.docs_output import blocks, output, quoted

    found = [b for doc in QUOTING for b in blocks(doc)]
    assert any(b.args[:3] == ["params", "--profile", "full"] and "--cost" in b.args for b in found)
    stale = [b.where for b in found if quoted(b) != output(b.args)]
    assert not stale, f"quoted output differs from the command's at {stale}: run `make docs`"


def settings_in_docs() -> list[tuple[str, str, str, list[str]]]:
    """(doc, flag, 'key=value', every 'key=value' of its command) of every `-S` / `--set` in the docs' code,
    as a shell would split it (settings of one command are given together: a third round with its slot)."""
    import shlex

    found = []
    for doc in DOCS:
        _, _, code = split_markdown(doc.read_text(encoding="utf-8"))
        for snippet in code:
            for line in snippet.replace("\\\n", " ").splitlines():
                if not re.search(r"(^|\s)(-S|--set)\s", line):
                    continue
                tokens = shlex.split(line.split(" #")[0])
                pairs = [(flag, value) for flag, value in zip(tokens, tokens[1:]) if flag in ("-S", "--set")]
                found += [(doc.name, flag, value, [v for _, v in pairs]) for flag, value in pairs]
    return found


def test_every_setting_the_docs_show_parses_through_the_typed_params():
    from factory.params.config import load_params
    from factory.utils.errors import FactoryError

    syntax = {"key=value", "dotted.key=value", "KEY=VALUE"}  # the flag's form, not a setting
    found = [f for f in settings_in_docs() if f[2].lstrip("+") not in syntax]
    assert len(found) > 10, "the scan finds the docs' settings"
    written = yaml.safe_load((ROOT / "params.yaml").read_text())
    bad = []
    for doc, flag, setting, together in found:
        key = setting.lstrip("+").split("=", 1)[0]
        try:
            given = [s.lstrip("+") for s in together if s.lstrip("+") not in syntax]
            load_params(ROOT / "params.yaml", given)
        except FactoryError as exc:
            bad.append(f"{doc}: {setting}: {exc}")
        # DVC's -S changes only a key the file sets; a key left at its default (commented) needs ++
        if flag == "-S" and not setting.startswith("+") and not _written(written, key):
            bad.append(f"{doc}: -S {setting}: params.yaml does not set {key}: write -S ++{setting}")
    assert not bad, "\n".join(bad)


def _written(data: dict, key: str) -> bool:
    node = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True
