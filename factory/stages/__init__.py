"""One module per DVC stage, in data-flow order (the number in the file name is the order).

Each module is a thin ``run(params, **options)`` over library code: it reads its inputs, calls
the library, writes its outputs and metrics. ``COMMAND`` names the ``factory`` subcommand.
"""

from __future__ import annotations

import argparse

from factory.config import VARIANTS


def chain_arguments(
    parser: argparse.ArgumentParser,
    round_help: str,
    *,
    variants: tuple[str, ...] = VARIANTS,
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
