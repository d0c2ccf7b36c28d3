"""factory.utils.templates: how every report and page gets its markup."""

from __future__ import annotations

import sys

import pytest
from jinja2 import UndefinedError

from factory.utils import templates


@pytest.fixture
def package(tmp_path, monkeypatch):
    """An importable package ``tplpkg`` with a templates/ folder; yields a function adding a template."""
    root = tmp_path / "tplpkg"
    (root / "templates").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield lambda name, text: (root / "templates" / name).write_text(text)
    sys.modules.pop("tplpkg", None)


def test_markdown_prints_values_as_they_are_and_block_lines_leave_nothing(package):
    package("t.md.j2", "# {{ title }}\n{% for r in rows %}\n| {{ r }} |\n{% endfor %}\nend\n")
    out = templates.environment("tplpkg").get_template("t.md.j2").render(title="A & <b>", rows=[1, 2])
    assert out == "# A & <b>\n| 1 |\n| 2 |\nend\n"


def test_html_is_escaped_with_html_escape_entities_and_is_one_line(package):
    package("p.html.j2", "<p>\n  {{ text }}\n</p>\n")
    out = templates.environment("tplpkg").get_template("p.html.j2").render(text='"it\'s" <b>')
    assert out == "<p>&quot;it&#x27;s&quot; &lt;b&gt;</p>"


def test_an_undefined_name_is_an_error_not_an_empty_string(package):
    package("u.md.j2", "{{ missing }}\n")
    with pytest.raises(UndefinedError, match="missing"):
        templates.environment("tplpkg").get_template("u.md.j2").render()


def test_every_packaged_template_loads():
    """The markdown templates the factory ships parse (a syntax error would only show when a stage
    renders); the audit page's HTML templates, which need its filters, are rendered in tests/relevance."""
    for package in (
        "factory.relevance",
        "factory.causal",
        "factory.simulate",
        "factory.bootstrap",
        "factory.variants",
    ):
        env = templates.environment(package)
        names = env.list_templates()
        assert names, package
        for name in names:
            if name.endswith(".md.j2"):
                env.get_template(name)
