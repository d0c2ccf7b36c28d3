"""Knowledge backtracing (docs/design.md §2): which generations of a trajectory contributed to its answer.

The public functions are importable from here; the rules are documented in ``labels`` (labels and
token accounting), ``graph`` (the graph G and the supporting subgraph S_q), ``targets`` (initial and
target entities) and ``linking`` (entity linking); ``tokens`` counts generated tokens, ``checks``
names a malformed record's field. They take ``params.backtrace``
(``factory.params.label_sections.BacktraceParams``); ``options`` loads what it names (the embedder, the
token counter), ``summary`` aggregates labels for the backtrace stage's metrics.
"""

from factory.backtrace.checks import BadTrajectory, check_trajectory
from factory.backtrace.graph import (
    Graph,
    build_graph,
    is_admin_relation,
    link,
    supporting_subgraph,
)
from factory.backtrace.labels import StepLabels, backtrace, backtrace_modes, step_labels
from factory.backtrace.targets import (
    YES_NO,
    answer_nodes,
    answers_nodes,
    comparison_targets,
    explored_entities,
    final_step,
    final_text,
    first_explore_step,
    initial_entities,
    target_entities,
)
from factory.backtrace.tokens import TokenCounter

__all__ = [
    "YES_NO",
    "BadTrajectory",
    "Graph",
    "StepLabels",
    "TokenCounter",
    "answer_nodes",
    "answers_nodes",
    "backtrace",
    "backtrace_modes",
    "build_graph",
    "check_trajectory",
    "comparison_targets",
    "explored_entities",
    "final_step",
    "final_text",
    "first_explore_step",
    "initial_entities",
    "is_admin_relation",
    "link",
    "step_labels",
    "supporting_subgraph",
    "target_entities",
]
