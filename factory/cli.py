"""The ``factory`` command: one subcommand per DVC stage (found in ``factory/stages/``).

Every subcommand takes ``--params FILE`` and any number of ``--set dotted.key=value`` (the same
keys ``dvc exp run -S`` sets). Failures print one human paragraph and exit non-zero; ``--debug``
shows the traceback.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import gc
import importlib
import logging
import os
import pkgutil
import re
import sys
import traceback
from pathlib import Path
from types import ModuleType

from factory.names import check_names
from factory.params.config import load_params
from factory.params.file import profile_of
from factory.params.profiles import PROFILES, explain, profile_params, render_current, render_profile
from factory.params.served import require_served_model, served_model_gaps
from factory.utils.errors import FactoryError, os_error_message
from factory.utils.io import write_jsonl, write_text

EXIT_FAILURE = 1
EXIT_USAGE = 2
STAGE_MODULE = re.compile(r"^s\d\d_\w+$")  # s<NN>_<name>: a stage; other modules there serve the stages


def stage_names() -> dict[str, str]:
    """command -> module name, in data-flow order ('s05_trajectories' -> 'trajectories')."""
    import factory.stages as pkg

    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if STAGE_MODULE.match(m.name))
    return {n.split("_", 1)[1].replace("_", "-"): n for n in names}


def _stage_help(module_name: str) -> str:
    """A stage's HELP string read without importing it (imports of torch & co. are slow)."""
    return _stage_constant(module_name, "HELP", "")


def _stage_constant(module_name: str, name: str, default):
    """A stage module's constant ``name`` (a literal) read without importing it, else ``default``."""
    import factory.stages as pkg

    tree = ast.parse((Path(pkg.__path__[0]) / f"{module_name}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    return default


def weight_stages() -> list[str]:
    """The stages that load the model's weights (``NEEDS_WEIGHTS = True`` in their module): on the openai
    backend only they need ``model.base``; the others run on a hosted API with no weights on disk."""
    return [c for c, m in stage_names().items() if _stage_constant(m, "NEEDS_WEIGHTS", False)]


def load_stage(command: str) -> ModuleType:
    module = importlib.import_module(f"factory.stages.{stage_names()[command]}")
    if getattr(module, "COMMAND", command) != command:
        raise RuntimeError(f"{module.__name__}: COMMAND {module.COMMAND!r} does not match its file name")
    return module


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", default="params.yaml", help="parameters file (default: params.yaml)")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one parameter, value parsed as YAML (repeatable), e.g. --set "
        "trajectories.n_questions=8",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """All subcommands; only the selected stage's module is imported (for its own options)."""
    parser = argparse.ArgumentParser(prog="factory", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="<stage>")
    for command, module_name in stage_names().items():
        help_text = _stage_help(module_name)
        p = sub.add_parser(command, help=help_text, description=help_text)
        _common(p)
        if command == selected:
            module = load_stage(command)
            if hasattr(module, "add_arguments"):
                module.add_arguments(p)
            p.set_defaults(_module=module)
    p = sub.add_parser(
        "params",
        help="print the params file of the current values (params.yaml and --set) or of a named profile",
    )
    _common(p)
    p.add_argument(
        "--profile",
        choices=list(PROFILES),
        help="start from this profile (the typed defaults and what it sets, factory/params/profiles.py) "
        "instead of params.yaml; --set still applies",
    )
    shown = p.add_mutually_exclusive_group()
    shown.add_argument(
        "--cost", action="store_true", help="print the protocol's LLM calls (formula and numbers) instead"
    )
    shown.add_argument(
        "--explain", action="store_true", help="print what the profile sets and why, as a markdown table"
    )
    p.add_argument("--output", metavar="FILE", help="write the params file to FILE instead of printing it")
    p.set_defaults(_module=None)
    p = sub.add_parser(
        "calibration-graphs",
        help="build a calibration graph file (calibration.graphs) from HippoRAG's published OpenIE output "
        "and the official MuSiQue records (factory/calibration/hipporag.py names the commit and files)",
    )
    _common(p)
    p.add_argument("--openie", required=True, metavar="FILE", help="HippoRAG's OpenIE JSON (its 'docs' list)")
    p.add_argument(
        "--records",
        required=True,
        nargs="+",
        metavar="FILE",
        help="official MuSiQue records (JSONL or a JSON list)",
    )
    p.add_argument("--output", required=True, metavar="FILE", help="the graph file to write (JSON Lines)")
    p.add_argument(
        "--split", default="train", help="the records' split, recorded in each record (default: train)"
    )
    p.set_defaults(_module=None)
    p = sub.add_parser(
        "compare-sets",
        help="say whether two published sets may be compared (the same served model, retriever, corpora and "
        "evaluation sets in their fingerprints) and what differs",
    )
    p.add_argument("sets_to_compare", nargs=2, metavar="FOLDER", help="two published set folders")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(_module=None)
    p = sub.add_parser("cache", help="list or drop response-cache entries by model, stage, outcome or date")
    from factory.llm.cache_admin import add_arguments as cache_arguments

    cache_arguments(p)
    p.set_defaults(_module=None)
    p = sub.add_parser(
        "check-corpora",
        help="check that the corpus files the params and dvc.yaml name exist, before any work (make demo's "
        "first step); if not, say where corpora come from; link them for DVC's temporary workspaces",
    )
    _common(p)
    p.set_defaults(_module=None)
    return parser


# The cyclic GC's young-generation threshold (700 allocations by default) made a stage re-scan its
# long-lived objects thousands of times: 17% of the trajectories stage's CPU at full size (25 s of
# 143, most in full collections), 11% at a quarter. A stage's objects are mostly long-lived or freed
# by reference counting, so it collects every 50,000 allocations instead (1.7 s at full size).
GC_THRESHOLDS = (50_000, 20, 10)


@contextlib.contextmanager
def _few_collections():
    old = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*old)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    selected = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(selected if selected in stage_names() else None)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    # Under torchrun / accelerate launch every process runs this: only rank 0 logs progress (the
    # others would repeat each line once per process); warnings and errors come from every rank.
    replica = int(os.environ.get("RANK", "0")) != 0
    level = logging.DEBUG if args.debug else logging.WARNING if replica else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for noisy in (
        "httpx",
        "urllib3",
        "filelock",
        "datasets",
        "great_expectations",
        "bm25s",
        "sentence_transformers",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        if args.command == "params":
            return _params_command(args)
        if args.command == "calibration-graphs":
            return _calibration_graphs(args)
        if args.command == "compare-sets":
            return _compare_sets(*args.sets_to_compare)
        if args.command == "cache":
            from factory.llm.cache_admin import run_command

            return run_command(args)
        params = check_names(load_params(args.params, args.sets))  # a misspelt name stops here
        if args.command == "check-corpora":
            from factory.corpora.check import (
                missing_calibration,
                missing_sources,
                no_calibration_message,
                no_corpora_message,
            )
            from factory.corpora.official import official_splits

            missing = missing_sources(params)
            if missing:
                raise FactoryError(no_corpora_message(missing))
            official_splits(params)  # a file whose official split cannot be told: refused before any work
            missing = missing_calibration()
            if missing:
                raise FactoryError(no_calibration_message(missing))
            from factory.utils.exps import link_outside

            link_outside()  # ../shared reached from `dvc exp run --temp` and queued experiments too
            return 0
        weights = getattr(args._module, "NEEDS_WEIGHTS", False)
        require_served_model(params, profile_of(args.params), args.params, weights=weights)
        options = {
            k: v for k, v in vars(args).items() if k not in {"params", "sets", "debug", "command", "_module"}
        }
        from factory.llm.responses import STAGE_ENV

        os.environ[STAGE_ENV] = args.command  # recorded with each response the stage caches
        with _few_collections():
            args._module.run(params, **options)
        return 0
    except FactoryError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"factory {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as exc:  # a full disk, a permission, a missing or misplaced path: said in words
        if args.debug:
            traceback.print_exc()
        print(f"factory {args.command}: {os_error_message(exc)}. {_outputs_now()}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"factory {args.command}: interrupted; re-run the same command to resume.", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one readable paragraph
        if args.debug:
            traceback.print_exc()
        print(
            f"factory {args.command}: unexpected {type(exc).__name__}: {exc}. "
            "Re-run with --debug for the traceback.",
            file=sys.stderr,
        )
        return EXIT_FAILURE


def _outputs_now() -> str:
    """What became of the stage's previous outputs. The factory writes outputs to temporaries and publishes
    them at the end (factory.utils.io), so a failed command leaves them as they were; but `dvc repro` and
    `dvc exp run` remove a stage's outputs before running its command, and set DVC_STAGE (the stage's name)
    in its environment (measured on DVC 3.67)."""
    stage = os.environ.get("DVC_STAGE")
    if stage:
        return f"DVC removed the stage's outputs before running it: `dvc checkout {stage}` brings them back."
    return "The stage's outputs are as they were."


def _params_command(args: argparse.Namespace) -> int:
    """`factory params`: the params file (or its cost, or a profile's table), printed or written."""
    started_from = args.profile or profile_of(args.params)
    if args.profile:
        params = check_names(profile_params(args.profile, args.sets))
        text = render_profile(args.profile, params)
    else:
        params = check_names(load_params(args.params, args.sets))
        text = render_current(params, started_from)
    if args.explain:
        if not args.profile:
            names = ", ".join(PROFILES)
            raise FactoryError(f"--explain lists what a profile sets: add --profile NAME ({names})")
        text = explain(args.profile)
    elif args.cost:
        from factory.bootstrap.cost import render_cost

        text = render_cost(params)
    if args.output:  # the table, the cost or the params file: whichever was asked for
        write_text(args.output, text)
        print(f"factory params: wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if not (args.explain or args.cost):
        _served_model_hint(params, started_from)
    return 0


def _served_model_hint(params, profile: str | None) -> None:
    """What a stage on these params would stop for (``require_served_model``), said ahead."""
    gaps = served_model_gaps(params)
    if not gaps:
        return
    unset = [key for key, kind, _ in gaps if kind == "not set"]
    said = [f"not set: {', '.join(unset)}"] if unset else []
    said += [
        f"folder missing: {params.model.base} (model.base)" for _, kind, _ in gaps if kind == "folder missing"
    ]
    whose = f"the {profile} profile's params" if profile else "these params"
    weights = (
        f"; model.base only for {', '.join(weight_stages())}" if "model.base" in {g[0] for g in gaps} else ""
    )
    print(
        f"factory params: before a stage runs on {whose}: {'; '.join(said)} (--set key=value here, or to "
        f"each stage{weights}; docs/full-scale.md)",
        file=sys.stderr,
    )


def _compare_sets(a: str, b: str) -> int:
    """`factory compare-sets A B`: 0 when the two sets' numbers may be compared, 1 (and why) when not."""
    from factory.variants.fingerprint import compare, read_fingerprint

    comparable, differs = compare(read_fingerprint(a), read_fingerprint(b))
    listed = ", ".join(differs) or "nothing"
    if not comparable:
        raise FactoryError(
            f"{a} and {b} cannot be compared: their settings differ in {listed} (the served model, "
            "retriever, corpora and evaluation sets must be equal; fingerprint.json in each folder has the "
            "values)"
        )
    print(f"factory compare-sets: comparable (differ in {listed})")
    return 0


def _calibration_graphs(args: argparse.Namespace) -> int:
    """`factory calibration-graphs`: HippoRAG's OpenIE output + MuSiQue records -> a graph file."""
    from factory.calibration.hipporag import convert

    records, left_out = convert(args.openie, args.records, args.split)
    if not records:
        raise FactoryError(
            f"no record of {', '.join(args.records)} has every paragraph among the passages of {args.openie} "
            f"({len(left_out)} left out{'; the first: ' + left_out[0]['reason'] if left_out else ''}): are "
            "these the records HippoRAG extracted from (its data/musique_train.json)?"
        )
    write_jsonl(args.output, records)
    for item in left_out:
        logging.getLogger("factory.calibration").warning(
            "left out %s %s (%s): %s", item["file"], item["location"], item["question_id"], item["reason"]
        )
    print(
        f"factory calibration-graphs: {len(records)} records -> {args.output} ({len(left_out)} left out)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
