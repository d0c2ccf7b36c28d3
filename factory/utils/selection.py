"""The selection methods' names: what keeps which triplets (units) of a trajectory, one name each.

The same name is the variant that trains on the method's selection (``factory/variants/registry.py``),
the method the relevance and calibration checks score against gold (``factory/relevance``,
``factory/calibration``) and its key in their metrics and reports. The names live here, on the floor
every room may import, because the checks may not import the variants room (it imports the causal
room, which imports the relevance check) and the registry is imported by the params.
"""

from __future__ import annotations

BACKTRACE = "backtrace"  # S_q: the generations knowledge backtracing says contributed to the answer
RANDOM = "random"  # the control: as many units removed as backtracing removed, drawn at random
UNFILTERED = "unfiltered"  # every unit (STaR-style; "keep all")
AUTHORS_RULE = "authors_rule"  # the KnowTrace authors' own backtracing rule (factory.backtrace.authors_rule)
ANSWER_ENTITY = "answer_entity"  # the checks' control only: the triplets naming an answer (no variant)


def backtrace_method(*mode: str) -> str:
    """The name of S_q under a backtrace mode (and target mode): ``backtrace/<mode>[/<target mode>]``."""
    return "/".join((BACKTRACE, *mode))


def backtrace_setting(method: str) -> str | None:
    """``<mode>[/<target mode>]`` of a ``backtrace/...`` method name; None for any other method."""
    prefix = f"{BACKTRACE}/"
    return method[len(prefix) :] if method.startswith(prefix) else None
