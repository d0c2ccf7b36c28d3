"""Training curves through DVCLive: per optimizer step loss, learning rate, grad norm and tokens seen.

``live_callback`` gives transformers' own DVCLive callback (``transformers.integrations.DVCLiveCallback``)
bound to one round's folder, ``dvclive/<variant>/seed_<s>/round_<r>/``:

- ``plots/metrics/train/{loss,learning_rate,grad_norm,tokens_seen}.tsv``: one row per optimizer step
  (``step`` = the Trainer's global step), the curves `dvc plots show` draws;
- ``metrics.json``: the last value of each, the step count and the round's status (``train.loss``,
  ``train.tokens_seen``, ``step``, ``status``);
- ``params.yaml``: params.train of the round.

dvc.yaml declares ``metrics.json`` an output and the curves its plots (`dvc exp show` keeps its columns
for the headline numbers, metrics/headline.json), so DVCLive writes no dvc.yaml of its own, saves no
experiment and never looks for a DVC repository (left to itself it would ``dvc init`` a git repository
that has none); it never posts to Studio either, whatever token the environment holds. Nothing it
writes carries a timestamp: same training, same bytes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

STEP_METRICS = ("loss", "learning_rate", "grad_norm", "tokens_seen")
# Trainer log key -> DVCLive metric (DVCLive's huggingface naming: train_<x> -> train/<x>)
_LOG_KEYS = {
    "loss": "train_loss",
    "learning_rate": "train_learning_rate",
    "grad_norm": "train_grad_norm",
    "num_input_tokens_seen": "train_tokens_seen",
}


def offline_live(live_dir: str | Path):
    """A ``dvclive.Live`` on ``live_dir`` that touches nothing but that folder (no repo, no Studio)."""
    from dvclive import Live

    class OfflineLive(Live):
        def _init_dvc(self):  # no repository lookup (nor `dvc init`), no experiment bookkeeping
            self._dvc_repo = None

        def _init_studio(self):  # never post to Studio, even with DVC_STUDIO_TOKEN set
            self._studio_events_to_skip.update({"start", "data", "done"})

        def post_data_to_studio(self):
            return None

    return OfflineLive(str(live_dir), save_dvc_exp=False, dvcyaml=False, report=None, resume=False)


def live_callback(live_dir: str | Path, train_params: dict):
    """transformers' DVCLive callback writing one round's curves to ``live_dir`` (rank 0 only)."""
    from transformers.integrations import DVCLiveCallback

    class RoundLiveCallback(DVCLiveCallback):
        def setup(self, args, state, model):
            # params.train of the round, not TrainingArguments.to_dict(): that holds the scratch output_dir
            self._initialized = True
            if state.is_world_process_zero:
                self.live = self.live or offline_live(live_dir)
                self.live.log_params(train_params)

        def on_log(self, args, state, control, model=None, logs=None, **kwargs):
            # Per-step logs only; the end-of-training summary (runtime, mean loss) is in metrics/train/.
            if not logs or "loss" not in logs:
                return
            if not self._initialized:
                self.setup(args, state, model)
            if self.live is not None:
                self.live.step = int(state.global_step)
            step_logs = {new: float(logs[old]) for old, new in _LOG_KEYS.items() if logs.get(old) is not None}
            super().on_log(args, state, control, model=model, logs=step_logs, **kwargs)

    return RoundLiveCallback()


def finish(live_dir: str | Path, status: str) -> None:
    """Add the round's status to ``metrics.json`` (DVCLive's summary) after training."""
    path = Path(live_dir) / "metrics.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    summary["status"] = status
    path.write_text(json.dumps(summary, indent=4) + "\n")


def write_untrained(live_dir: str | Path, status: str) -> None:
    """The folder of a round that trained nothing (skipped, empty set): no curve, its status (the reason
    is in metrics/train/)."""
    out = Path(live_dir)
    shutil.rmtree(out, ignore_errors=True)
    (out / "plots" / "metrics").mkdir(parents=True)
    finish(out, status)


def reset(live_dir: str | Path) -> None:
    """Remove what an earlier run left (a stale curve must never survive a rerun)."""
    shutil.rmtree(Path(live_dir), ignore_errors=True)
