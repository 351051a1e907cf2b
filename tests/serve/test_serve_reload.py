"""``POST /admin/reload``: the trainer's OpenAI-compatible sampler pushes a new LoRA adapter into a
running ``mtrl-gym serve`` (real uvicorn on 127.0.0.1, a tiny peft model), and later samples
come from the new weights."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from tiny_models import build_tiny_llama  # noqa: E402

from mtrl_gym.error import SamplerError  # noqa: E402
from mtrl_gym.rollout.samplers.base import SampleRequest, SamplingParams  # noqa: E402
from mtrl_gym.rollout.samplers.hf import HFSampler  # noqa: E402
from mtrl_gym.rollout.samplers.openai import OpenAISampler  # noqa: E402
from mtrl_gym.trainers.grpo.policy import prepare_policy  # noqa: E402


def lora_policy(tokenizer):
    torch.set_num_threads(1)
    return prepare_policy(build_tiny_llama(len(tokenizer), seed=0), full_finetune=False, lora_rank=4,
                          lora_alpha=8.0, lora_dropout=0.0, lora_target_modules="all-linear",
                          gradient_checkpointing=False, seed=0, lora_layers=None)


def lora(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def test_reload_pushes_the_trainers_adapter_into_the_server(serve, tmp_path, chatml_tokenizer):
    served = lora_policy(chatml_tokenizer).eval()
    server = serve(HFSampler(served, chatml_tokenizer), chatml_tokenizer)
    trained = lora_policy(chatml_tokenizer)
    with torch.no_grad():
        for name, p in trained.named_parameters():
            if "lora_B" in name:
                p.add_(0.1 * torch.randn_like(p))
    client = OpenAISampler(server.url, model="tiny", reload_dir=str(tmp_path / "adapters"), max_retries=5,
                           backoff_s=0.05)
    request = SampleRequest(chatml_tokenizer.encode("Say something."),
                            SamplingParams(temperature=0.0, max_new_tokens=5))
    before = client.sample([request])[0]
    client.update_policy(trained, version=7)
    assert (tmp_path / "adapters" / "v000007" / "adapter_model.safetensors").is_file()
    want, got = lora(trained), lora(served)
    assert want.keys() == got.keys() and all(torch.equal(want[n], got[n]) for n in want)
    assert server.service.policy_version == 7
    after = client.sample([request])[0]
    local = HFSampler(trained.eval(), chatml_tokenizer).sample([request])[0]
    assert after.token_ids == local.token_ids and after.logprobs == pytest.approx(local.logprobs, abs=1e-5)
    assert after.logprobs != pytest.approx(before.logprobs, abs=1e-5)  # the weights did change
    client.close()


def test_reload_refuses_a_folder_without_an_adapter_and_keeps_serving(serve, tmp_path, chatml_tokenizer):
    server = serve(HFSampler(lora_policy(chatml_tokenizer).eval(), chatml_tokenizer), chatml_tokenizer)
    body = json.dumps({"adapter_path": str(tmp_path), "version": 1}).encode()
    req = urllib.request.Request(server.url + "/admin/reload", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=30)
    assert info.value.code == 400 and "has no adapter_model.safetensors" in info.value.read().decode()
    client = OpenAISampler(server.url, model="tiny", max_retries=0)
    with pytest.raises(SamplerError, match="HTTP 400 .*`adapter_path` must be a LoRA adapter folder"):
        client.update_policy(adapter_path="", version=2)
    assert client.sample([SampleRequest([1, 5, 6], SamplingParams(max_new_tokens=2))])[0].finish_reason != "error"
    client.close()
