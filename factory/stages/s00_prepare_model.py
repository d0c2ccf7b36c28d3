"""Stage prepare-model: the base model as a normal transformers folder under models/base/."""

from __future__ import annotations

import logging

from factory.llm.prepare import prepare_base_model
from factory.params.config import Params
from factory.utils.io import outputs_together

COMMAND = "prepare-model"
HELP = "convert the embedded SmolLM2 GGUF (or model.base) into a transformers model folder"
# it converts the weights model.base names (on the openai backend: the served model's folder; factory.cli)
NEEDS_WEIGHTS = True
log = logging.getLogger(__name__)


@outputs_together()
def run(params: Params) -> None:
    info = prepare_base_model(params.model.base, params.model.dir, params.model.dtype)
    log.info(
        "prepare-model: %s -> %s (%s params, %s)",
        params.model.base,
        params.model.dir,
        f"{info['parameters']:,}",
        info["dtype"],
    )
