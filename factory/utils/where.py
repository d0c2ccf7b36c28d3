"""Print where a finished run put its report, metrics and published sets (the end of `make demo`)."""

from __future__ import annotations

from pathlib import Path

ITEMS = [
    ("bootstrap report", "reports/bootstrap.md"),
    ("relevance-label report", "reports/relevance.md"),
    ("backtracing sensitivity (simulator)", "reports/backtrace_sensitivity.md"),
    ("summary metrics", "metrics/summary.json"),
    ("published supervision sets", "data/published"),
    ("TRACE exports", "data/trace"),
    ("data-quality docs (Great Expectations)", "reports/gx"),
]


def main() -> None:
    print("\nTraceFactory run finished. Results:")
    for label, path in ITEMS:
        mark = "" if Path(path).exists() else "  (not produced)"
        print(f"  {label:42s} {path}{mark}")


if __name__ == "__main__":
    main()
