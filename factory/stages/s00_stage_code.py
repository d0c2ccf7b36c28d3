"""Stage stage-code: data/code/<module>.json for every stage module, the code each stage depends on.

Each file lists the files of the stage module's import closure (and its packages' templates) with their
sha256 (``factory.utils.stage_code``). dvc.yaml gives this stage the whole code tree as deps and every
other stage its own digest file: a code change re-runs this stage (a second), then exactly the stages
whose digest changed, and dvc.lock keeps one code entry per stage instead of a dozen.
"""

from __future__ import annotations

import logging
from pathlib import Path

from factory.cli import stage_names
from factory.params.config import Params
from factory.utils import paths
from factory.utils.io import output_folder, outputs_together
from factory.utils.stage_code import ROOT, digest, digest_text

COMMAND = "stage-code"
HELP = "write the digest of the code each stage runs (data/code/<module>.json), the code dep of its stage"
log = logging.getLogger(__name__)


@outputs_together()
def run(params: Params) -> dict:
    folder = output_folder(paths.CODE_DIR)
    counts = {}
    for module in sorted(stage_names().values()):
        if module == Path(__file__).stem:
            continue  # this stage's deps are the code tree itself
        found = digest(ROOT / "factory" / "stages" / f"{module}.py")
        (folder / f"{module}.json").write_text(digest_text(found))
        counts[module] = len(found["files"])
    log.info(
        "stage-code: %d stage modules, %d to %d files each -> %s",
        len(counts),
        min(counts.values()),
        max(counts.values()),
        paths.CODE_DIR,
    )
    return counts
