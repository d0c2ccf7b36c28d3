"""An HTML template for `dvc plots show` that renders without network.

DVC's own page loads Vega, Vega-Lite and Vega-Embed from a CDN when it is opened. This writes
``.dvc/plots/offline.html`` (``.dvc/config`` names it as ``plots.html_template``): DVC's page with the
three libraries inlined, taken from the ``vl-convert-python`` wheel (``vl_convert.javascript_bundle``),
so ``dvc_plots/index.html`` draws its charts on a machine without network. ``make setup`` runs it
(``python -m factory.utils.dvc_plots``); the file is generated, never committed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

TEMPLATE = Path(".dvc/plots/offline.html")
VEGA_LITE = "5.21"  # DVC writes Vega-Lite v5 specs

PAGE = """<!DOCTYPE html>
<html>
<head>
    {refresh_tag}
    <meta charset="utf-8">
    <title>DVC Plot</title>
    <script>
BUNDLE
    </script>
    <style>
        table {
            border-spacing: 15px;
        }
    </style>
</head>
<body>
    {plot_divs}
</body>
</html>
"""


def render() -> str:
    """The template: dvc-render's page, its CDN scripts replaced by the inlined libraries."""
    import vl_convert

    bundle = vl_convert.javascript_bundle(vl_version=VEGA_LITE)
    for placeholder in ("{plot_divs}", "{scripts}", "{refresh_tag}", "</script"):
        if placeholder in bundle:
            raise RuntimeError(f"the Vega bundle contains {placeholder!r}; it cannot be inlined as it is")
    return PAGE.replace("BUNDLE", bundle)


def write(path: Path = TEMPLATE) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = render()
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=str(TEMPLATE))
    print(write(Path(parser.parse_args(argv).path)))


if __name__ == "__main__":
    main()
