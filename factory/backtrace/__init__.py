"""Knowledge backtracing (docs/design.md §2): which generations of a trajectory contributed to its answer.

The package face imports nothing, so a module that imports one rule (``authors_rule``) loads only that
module. The rules are documented in ``labels`` (labels and token accounting), ``graph`` (the graph G and
the supporting subgraph S_q), ``targets`` (initial and target entities) and ``linking`` (entity
linking); ``tokens`` counts generated tokens, ``checks`` names a malformed record's field. They take
``params.backtrace`` (``factory.params.label_sections.BacktraceParams``); ``options`` loads what it
names (the embedder, the token counter), ``summary`` aggregates labels for the backtrace stage's
metrics.
"""
