"""The model LoRA trains: the base model with its adapter (a fresh one from ``lora_config``, or the
previous round's to continue from), its tokenizer, and the loss projection that computes logits only
at labelled positions. ``factory.train.lora`` trains it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from factory.params.round_sections import TrainParams
from factory.train.examples import IGNORE
from factory.utils.errors import FactoryError
from factory.utils.io import loading_weights

log = logging.getLogger(__name__)


def lora_config(params: TrainParams):
    """PEFT LoraConfig from params.train (rank, alpha, dropout, target modules)."""
    from peft import LoraConfig

    return LoraConfig(
        r=params.lora_r,
        lora_alpha=params.lora_alpha,
        lora_dropout=params.lora_dropout,
        target_modules=list(params.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )


def _check_init_adapter(init_adapter: Path, params: TrainParams) -> None:
    """Continuing an adapter only makes sense with the same rank, alpha and target modules."""
    config_path = init_adapter / "adapter_config.json"
    if not config_path.exists():
        raise FactoryError(f"{init_adapter} is not a LoRA adapter folder (no adapter_config.json)")
    saved = json.loads(config_path.read_text())
    wanted = {
        "r": params.lora_r,
        "lora_alpha": params.lora_alpha,
        "target_modules": sorted(params.target_modules),
    }
    found = {
        "r": saved.get("r"),
        "lora_alpha": saved.get("lora_alpha"),
        "target_modules": sorted(saved.get("target_modules") or []),
    }
    if wanted != found:
        raise FactoryError(
            f"cannot continue adapter {init_adapter}: it was trained with {found}, params.train asks for "
            f"{wanted}; "
            "retrain from the base model (train.init: base) or restore the earlier LoRA settings"
        )


def load_tokenizer(model_path: str | Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


# Config fields of models whose LM head output is scaled or soft-capped: they keep their own loss.
_SCALED_LOGITS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)


def project_labelled_positions_only(model) -> bool:
    """Make the model's training loss run the LM head on labelled positions only.

    The loss is the model's own (fp32 cross-entropy summed over labelled next tokens, divided by
    the Trainer's ``num_items_in_batch``, else averaged), but without the (batch, seq, vocab)
    logits: assistant tokens are a small share of an agent example, and the head plus the fp32
    softmax over a large vocabulary are a large share of the step. Applied before PEFT wraps the
    model (PEFT and DDP call this forward); inference (no labels, or eval mode) is unchanged.
    Returns False, leaving the model as it is, for architectures this does not cover.
    """
    import functools

    import torch
    import torch.nn.functional as F
    from transformers.modeling_outputs import CausalLMOutputWithPast

    config = model.config.get_text_config()
    backbone_name = getattr(model, "base_model_prefix", "")
    if any(getattr(config, a, None) is not None for a in _SCALED_LOGITS):
        return False
    if (
        not backbone_name
        or getattr(model, backbone_name, None) is None
        or model.get_output_embeddings() is None
    ):
        return False
    original = model.forward

    @functools.wraps(original)
    def forward(*args, labels=None, num_items_in_batch=None, **kwargs):
        if labels is None or not model.training:
            if labels is not None:
                kwargs["labels"] = labels
            if num_items_in_batch is not None:
                kwargs["num_items_in_batch"] = num_items_in_batch
            return original(*args, **kwargs)
        kwargs.pop("logits_to_keep", None)
        kwargs["use_cache"] = False
        # Looked up per call: PEFT may wrap the head's or the backbone's layers after this patch.
        hidden = getattr(model, backbone_name)(*args, **kwargs).last_hidden_state
        head = model.get_output_embeddings()
        targets = labels[:, 1:].to(hidden.device)
        mask = targets != IGNORE
        logits = head(hidden[:, :-1][mask])
        loss = F.cross_entropy(logits.float(), targets[mask], reduction="sum")
        count = num_items_in_batch if num_items_in_batch is not None else mask.sum()
        loss = loss / torch.as_tensor(count, device=loss.device).clamp(min=1)
        return CausalLMOutputWithPast(loss=loss)

    model.forward = forward
    return True


def build_model(model_path: str | Path, params: TrainParams, init_adapter: str | Path | None, dtype: str):
    """The base model with a trainable LoRA adapter: a fresh one (seeded) or ``init_adapter`` continued."""
    import torch
    from peft import PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, set_seed

    set_seed(params.seed)  # LoRA A matrices are drawn from torch's RNG
    with loading_weights(model_path):  # a damaged model.safetensors: named, with how to restore it
        model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=getattr(torch, dtype))
    model.config.use_cache = False
    if not project_labelled_positions_only(model):
        log.info("train: %s keeps its own loss (full logits)", type(model).__name__)
    if init_adapter is not None:
        _check_init_adapter(Path(init_adapter), params)
        return PeftModel.from_pretrained(model, str(init_adapter), is_trainable=True)
    try:
        return get_peft_model(model, lora_config(params))
    except ValueError as exc:  # e.g. target modules the architecture does not have
        raise FactoryError(f"cannot attach LoRA to {model_path}: {exc}") from None


def load_adapter_model(model_path: str | Path, adapter_dir: str | Path):
    """Base model + saved adapter in eval mode (fp32 on CPU), e.g. to check a trained round."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    with loading_weights(model_path):
        base = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
    return PeftModel.from_pretrained(base, str(adapter_dir)).eval()
