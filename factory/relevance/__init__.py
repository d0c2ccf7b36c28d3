"""Relevance labels against the corpora's gold supporting facts (docs/design.md §4): grounding, controls, CIs,
reports."""
