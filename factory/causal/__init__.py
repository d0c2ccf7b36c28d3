"""The causal check of backtracing (docs/design.md §4): correct answers re-asked on other graphs (``reask``),
the effects and verdicts (``effects``), and its section of the relevance report (``report``)."""
