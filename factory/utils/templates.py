"""Jinja2 templates: the one way a report or a page gets its markup.

A package keeps its templates in a ``templates/`` folder beside its modules (package data: listed under
``[tool.setuptools.package-data]`` in pyproject.toml, and as a dep of the stages that render them in
dvc.yaml); its modules prepare plain values (which rows, which numbers, each number formatted) and the
template lays them out. ``render(package, name, **values)`` renders one; ``environment(package)`` is a
package's own Environment, for a module that adds filters.

Every template: an undefined name is an error (StrictUndefined) rather than an empty string; the last
newline is kept; a line that holds only a block tag (``{% for %}``, ``{% if %}``, ...) leaves nothing,
not even its newline (trim_blocks, lstrip_blocks; ``+%}`` keeps the newline where a line ends in a tag).
Markdown (``*.md.j2``) prints its values as they are. HTML (``*.html.j2``) escapes every value with
``html.escape``'s entities (the ones the audit page has always had: &quot; and &#x27;, where Jinja2's
own escaping writes &#34; and &#39;), and is one line: a newline and the indentation after it are
dropped when the template is loaded, so it puts one element on each line.
"""

from __future__ import annotations

import html
import re
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, pass_eval_context
from jinja2.ext import Extension
from jinja2.nodes import EvalContext
from markupsafe import Markup

HTML = ".html.j2"


def _is_html(name: str | None) -> bool:
    return bool(name) and name.endswith(HTML)


class _OneLine(Extension):
    """An HTML template is one line: its newlines and the indentation after them are dropped."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return re.sub(r"\n[ \t]*", "", source) if _is_html(name) else source


@pass_eval_context
def _escaped(context: EvalContext, value: Any) -> Any:
    """In an escaped (HTML) template every printed value is escaped with html.escape; markup passes."""
    if not context.autoescape or hasattr(value, "__html__"):
        return value
    return Markup(html.escape(str(value)))


def environment(package: str) -> Environment:
    """A new Environment of the templates in ``package``'s templates/ folder."""
    return Environment(
        loader=PackageLoader(package),
        extensions=[_OneLine],
        undefined=StrictUndefined,
        autoescape=_is_html,
        finalize=_escaped,
        keep_trailing_newline=True,  # a template's last newline stays
        trim_blocks=True,  # a line holding only a block tag leaves nothing
        lstrip_blocks=True,
    )


@cache
def _environment(package: str) -> Environment:
    return environment(package)


def fixed(x: float | None, digits: int = 2, missing: str = "n/a") -> str:
    """A number as the reports print it: ``digits`` decimals; ``missing`` for None."""
    return missing if x is None else f"{x:.{digits}f}"


def render(package: str, name: str, /, **values: Any) -> str:
    """Template ``name`` of ``package`` (its templates/ folder) filled with ``values``."""
    return _environment(package).get_template(name).render(**values)
