"""What a bootstrapping protocol costs in LLM calls, from the params alone (``factory params --cost``);
its tokens, LoRA training memory and GPU-hours are estimated in factory.bootstrap.cost_gpu.

Upper bounds: a trajectory makes at most ``c = (L x (1 + P) + 1) x (1 + A)`` calls (L =
agent.max_iterations explore steps, each with at most P = agent.max_pairs complete calls, one forced
final call, every call re-asked at most A = agent.repair_attempts times); trajectories that answer
early, find no new triplet or fail make fewer. The counterfactual check re-asks at most
``counterfactual.max_trajectories`` correct trajectories of a round once per condition (the random
control once per seed). The entailment judge (``grounding.judge: llm``) makes one call per distinct
grounded (passage, triplet) of the correct trajectories: that depends on the graphs, not on the
params, so it is counted in metrics/relevance.json, not here. The response cache makes a repeated
call free, so a re-run after an interruption costs only what was not done yet.
"""

from __future__ import annotations

from factory.bootstrap.cost_gpu import render_gpu_cost
from factory.params.config import Params


def calls_per_trajectory(params: Params) -> int:
    """At most this many LLM calls per trajectory (repairs included)."""
    a = params.agent
    return (a.max_iterations * (1 + a.max_pairs) + 1) * (1 + a.repair_attempts)


def counterfactual_calls_per_trajectory(params: Params) -> int:
    """At most this many re-asks per trajectory in the counterfactual check (repairs included)."""
    cf = params.counterfactual
    graphs = len(cf.conditions) + (cf.random_seeds - 1 if "without_random" in cf.conditions else 0)
    return graphs * (1 + params.agent.repair_attempts)


def protocol_cost(params: Params) -> dict:
    """Upper bounds of LLM calls: per round of one chain, per chain, and for the whole run."""
    c = calls_per_trajectory(params)
    t, e, b = params.trajectories, params.evaluate, params.bootstrap
    chains = len(b.variants) * len(b.seeds)
    # rationalization: at most one more trajectory per training question (all its samples wrong)
    trajectories = t.n_questions * t.samples + (t.n_questions if t.rationalize else 0)
    # the counterfactual check re-asks correct trajectories only: at most all of them, capped
    reasked = min(trajectories, params.counterfactual.max_trajectories)
    counterfactual = reasked * counterfactual_calls_per_trajectory(params)
    # the round's trajectories + its counterfactual check + its held-out evaluation
    per_round = (trajectories + e.n_questions) * c + counterfactual
    per_chain = b.max_rounds * per_round + e.n_questions * c  # + the selected round's test evaluation
    once = e.n_questions * c + params.routes.n_questions * len(params.corpora)  # base held-out, routes
    return {
        "calls_per_trajectory": c,
        "trajectories_per_round": trajectories,
        "counterfactual_per_round": counterfactual,
        "per_round": per_round,
        "chains": chains,
        "per_chain": per_chain,
        "total": chains * per_chain + once,
    }


def render_cost(params: Params) -> str:
    """The formula, the values it takes from the params, and the numbers."""
    a, t, e, b = params.agent, params.trajectories, params.evaluate, params.bootstrap
    cf = params.counterfactual
    cost = protocol_cost(params)
    g = counterfactual_calls_per_trajectory(params) // (1 + a.repair_attempts)
    c = cost["calls_per_trajectory"]
    extra, extra_n = (" + N", f" + {t.n_questions}") if t.rationalize else ("", "")
    lines = [
        "# LLM calls of this protocol (upper bounds; the response cache makes repeated calls free)",
        "# L = agent.max_iterations, P = agent.max_pairs, A = agent.repair_attempts,",
        "# N = trajectories.n_questions, k = trajectories.samples, H = evaluate.n_questions,",
        "# R = bootstrap.max_rounds, V = |bootstrap.variants|, S = |bootstrap.seeds|,",
        "# M = counterfactual.max_trajectories, G = counterfactual graphs per trajectory (conditions, the",
        "# random control once per counterfactual.random_seeds), Q = routes.n_questions, D = datasets"
        + (" (+ N: trajectories.rationalize, at most one more trajectory a question)" if extra else ""),
        f"per trajectory  c = (L(1 + P) + 1)(1 + A) = ({a.max_iterations}(1 + {a.max_pairs}) + 1)"
        f"(1 + {a.repair_attempts}) = {c}",
        f"counterfactual  min(N k{extra}, M) G (1 + A) = min({t.n_questions} x {t.samples}{extra_n}, "
        f"{cf.max_trajectories}) x {g} x (1 + {a.repair_attempts}) = {cost['counterfactual_per_round']:,}"
        "   (re-asks of correct trajectories)",
        f"per round       (N k{extra} + H) c + counterfactual = ({t.n_questions} x {t.samples}{extra_n} + "
        f"{e.n_questions}) x {c} + {cost['counterfactual_per_round']:,} = {cost['per_round']:,}"
        "   (trajectories + counterfactual + held-out evaluation)",
        f"per round, all chains  V S x per round = {len(b.variants)} x {len(b.seeds)} x {cost['per_round']:,}"
        f" = {cost['chains'] * cost['per_round']:,}",
        f"per chain       R x per round + H c = {b.max_rounds} x {cost['per_round']:,} + "
        f"{e.n_questions} x {c} = {cost['per_chain']:,}   (+ the test evaluation, once)",
        f"whole run       V S x per chain + H c + Q D = {len(b.variants)} x {len(b.seeds)} x "
        f"{cost['per_chain']:,} + {e.n_questions} x {c} + {params.routes.n_questions} x {len(params.corpora)}"
        f" = {cost['total']:,}   (+ the base model's held-out evaluation and the route classifier)",
    ]
    lines += render_gpu_cost(params, cost["total"], cost["chains"] * b.max_rounds)
    return "\n".join(lines) + "\n"


# The entailment judge's calls are not in the bound: see the module docstring.
