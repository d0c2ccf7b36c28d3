"""What a published card proves about its questions, from the run's own metrics: the official split
they come from, the evaluation sets they were checked against (files with sha256, rules, thresholds,
counts removed per rule) and the settings fingerprint (templates/provenance.md.j2)."""

from __future__ import annotations


def provenance_context(info: dict) -> dict:
    """The card's provenance sections from ``info``'s ``ingest`` and ``decontamination`` metrics and
    ``fingerprint`` (empty lists where a run has none)."""
    ingest = info.get("ingest") or {}
    decontamination = info.get("decontamination") or {}
    datasets = ingest.get("datasets") or {}
    return {
        "sources": [
            {
                "file": f,
                **{k: s[k] for k in ("dataset", "official_split", "ingested")},
                "sha256": s["sha256"] or "n/a",
            }
            for f, s in sorted((ingest.get("sources") or {}).items())
        ],
        "test_only": sorted(d for d, c in datasets.items() if c.get("test_only")),
        "eval_sets": decontamination.get("eval_sets") or [],
        "rules": (decontamination.get("rules") or {}).get("applied") or [],
        "thresholds": _thresholds((decontamination.get("rules") or {}).get("params") or {}),
        "removed": [
            {"dataset": d, **c, "by_rule": sorted(c["by_rule"].items())}
            for d, c in sorted((decontamination.get("datasets") or {}).items())
        ],
        "fingerprint": info.get("fingerprint") or {},
    }


def _thresholds(params: dict) -> list[tuple[str, str]]:
    """The decontamination settings as (key, value) lines, the evaluation files left out (listed apart)."""
    return [(key, str(value)) for key, value in sorted(params.items()) if key != "eval_sets"]
