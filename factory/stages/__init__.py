"""One module per DVC stage, ``s<NN>_<name>.py``, numbered in data-flow order (dvc.yaml's).

Each module is a thin ``run(params, **options)`` over library code: it reads its inputs, calls
the library, writes its outputs and metrics. ``COMMAND`` names the ``factory`` subcommand. Two modules
serve two DVC stages each, numbered at their place in a round: ``s11_evaluate`` (``evaluate_base``,
before the chains, and ``evaluate`` after each round's training) and ``s12_bootstrap`` (``start``, a
chain's first decision, and ``decide`` after each round). ``round.py`` is no stage: what the round
stages share (a round's paths, the branch for a round that does not run, its metrics).
"""

from __future__ import annotations

import argparse

from factory.variants import registry


def chain_arguments(
    parser: argparse.ArgumentParser,
    round_help: str,
    *,
    variants: tuple[str, ...] = registry.NAMES,
    round_default: int | None = None,
) -> None:
    """The options that name one round of one chain: ``--variant V --round R --seed S``.

    ``round_default=None`` makes ``--round`` required; the value lands in ``round_`` (``round``
    shadows a builtin in ``run``'s signature).
    """
    parser.add_argument(
        "--variant", required=True, choices=variants, help="supervision variant whose chain this is"
    )
    parser.add_argument(
        "--round",
        dest="round_",
        metavar="R",
        type=int,
        required=round_default is None,
        default=round_default,
        help=round_help,
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="protocol seed of the chain (one of bootstrap.seeds)"
    )
