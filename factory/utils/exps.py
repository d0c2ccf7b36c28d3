"""Reach the folders outside the project (``../shared``) from DVC's temporary experiment workspaces.

``dvc exp run --temp`` runs the pipeline in ``.dvc/tmp/exps/standalone/<tmp>/`` and a queued experiment
(``dvc exp run --queue`` + ``dvc queue start``) in ``.dvc/tmp/exps/<tmp>/``: a checkout of the git tree
there. A dependency written ``../shared/corpora`` in dvc.yaml (and a corpus file ``../shared/...`` in
params.yaml) then resolves to ``.dvc/tmp/exps/standalone/shared/corpora``, which does not exist, and DVC
stops before the stage runs. Measured on DVC 3.67 (2026-12-06): a link at that place to the real folder
makes both ways run, with the same paths in dvc.lock as a workspace run, so an experiment and ``dvc repro``
share the run cache and ``dvc.lock`` stays machine-independent. The alternatives measured worse: a
committed relative link ``shared -> ../shared`` in the repository is checked out inside the temporary
folder and points at the same missing place; absolute paths interpolated from params.yaml make
params.yaml and dvc.lock differ per machine.

``link_outside`` makes those links (``factory check-corpora`` does, the first step of ``make demo``);
``.dvc/tmp`` is DVC's scratch folder, never committed or pushed.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

# Where DVC 3 makes its temporary workspaces, each one folder below (dvc/repo/experiments/executor).
EXP_TMP_DIRS = (Path(".dvc/tmp/exps"), Path(".dvc/tmp/exps/standalone"))


def outside_paths(root: Path = Path(".")) -> list[str]:
    """Every relative path going above the project that dvc.yaml's deps or params.yaml's values name."""
    found: dict[str, None] = {}
    for name in ("dvc.yaml", "params.yaml"):
        try:
            data = yaml.safe_load((root / name).read_text())
        except (OSError, yaml.YAMLError):
            continue  # dvc and load_params name a file they cannot read
        for value in _strings(data):
            if value.startswith("../"):
                found[value] = None
    return list(found)


def _strings(data) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v)]
    return []


def link_outside(root: Path = Path(".")) -> list[Path]:
    """Link each top folder above the project that the run names (``../shared``) where a path read from
    DVC's temporary workspaces lands; returns the links made or renewed. A folder missing here is left to
    ``check-corpora``'s own message; a path climbing more than one level is not linked (it would land in
    the repository itself), so it keeps failing in those workspaces as before."""
    tops = {
        Path(p).parts[1] for p in outside_paths(root) if len(Path(p).parts) > 1 and Path(p).parts[1] != ".."
    }
    made = []
    for top in sorted(tops):
        target = (root / ".." / top).resolve()
        if not target.exists():
            continue
        for tmp in EXP_TMP_DIRS:
            link = root / tmp / top
            if link.is_symlink() and Path(os.readlink(link)) == target:
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink():
                link.unlink()
            elif link.exists():
                continue  # not ours: DVC made something of that name; leave it
            link.symlink_to(target, target_is_directory=True)
            made.append(link)
    return made
