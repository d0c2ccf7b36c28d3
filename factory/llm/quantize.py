"""int8 weights for the local backend on CPU (``llm.dtype: int8``).

On a CPU, decoding a batch reads every weight once per token, and on small machines memory, not
arithmetic, sets the pace: fp32 reads 4 bytes a weight, bf16 2, int8 1. torch's own dynamic quantization
(``torch.ao.quantization.quantize_dynamic``: fbgemm kernels, VNNI where the CPU has it) stores each linear
layer's weight in int8 with a per-channel scale and quantizes the activations of each call on the fly; no
calibration data, no other package. A LoRA adapter is merged into the base weights first, so the merged
weight is what is quantized (quantizing the small adapter matrices on their own would lose them).

The embedding table stays fp32 (a lookup reads one row per token); the output projection, tied to it in
SmolLM2, is a linear layer of its own here and is quantized (it is a fifth of the reads per token).
The text differs from fp32's: a quantized model is another model, and its identity says so
(``:int8``), so cached replies never mix precisions. Like bf16, it is not batch-invariant (the activations'
scale is taken over the batch); runs stay reproducible because the agent forms the same batches.

Why torch's own API, which torch now deprecates in favour of torchao: torchao's int8 configs
(``Int8DynamicActivationInt8WeightConfig``, ``Int8WeightOnlyConfig``, 0.18) and ``aten._weight_int8pack_mm``
took 26-80x longer than fbgemm's kernel for SmolLM2's output projection at a decoding batch of 8 on a 2-core
Xeon (2026-12-07): they target GPUs. GPUs run bf16 instead (``factory.llm.local``).
"""

from __future__ import annotations

from factory.utils.errors import FactoryError


def quantize_int8(model):
    """``model`` (fp32, on the CPU; a PeftModel is merged first) with its linear layers in int8."""
    import warnings

    import torch

    if hasattr(model, "merge_and_unload"):  # a PEFT adapter: merged into the weights it adapts
        model = model.merge_and_unload()
    head = model.get_output_embeddings()
    if head is not None and head.weight is model.get_input_embeddings().weight:
        # untie: the head gets its own copy to quantize, the embedding keeps its fp32 rows
        head.weight = torch.nn.Parameter(head.weight.detach().clone(), requires_grad=False)
    torch.backends.quantized.engine = _engine()
    with warnings.catch_warnings():  # torch deprecates this API for torchao; see the module's docstring
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def _engine() -> str:
    """fbgemm on x86 (AVX2/AVX512, VNNI), qnnpack on ARM."""
    import torch

    engines = torch.backends.quantized.supported_engines
    for name in ("fbgemm", "x86", "qnnpack"):
        if name in engines:
            return name
    raise FactoryError(f"this torch build has no int8 CPU engine (supported: {engines}); use llm.dtype auto")
