"""Relevance labels against the corpora's gold supporting facts (DESIGN §4): grounding, controls, CIs,
reports."""
