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
                           backoff_s=0.05, api_key=server.api_key)
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
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=30)
    assert info.value.code == 400 and "has no adapter_model.safetensors" in info.value.read().decode()
    client = OpenAISampler(server.url, model="tiny", max_retries=0, api_key=server.api_key)
    with pytest.raises(SamplerError, match="HTTP 400 .*`adapter_path` must be a LoRA adapter folder"):
        client.update_policy(adapter_path="", version=2)
    assert client.sample([SampleRequest([1, 5, 6], SamplingParams(max_new_tokens=2))])[0].finish_reason != "error"
    client.close()


def _reload(server, body, key):
    req = urllib.request.Request(server.url + "/admin/reload", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_reload_fails_loudly_on_a_server_without_a_lora_adapter(serve, tiny_model, tmp_path, chatml_tokenizer):
    server = serve(HFSampler(tiny_model, chatml_tokenizer), chatml_tokenizer)  # a plain model: nothing to load into
    adapter = tmp_path / "adapter"
    lora_policy(chatml_tokenizer).save_pretrained(adapter)
    before = {n: p.detach().clone() for n, p in tiny_model.named_parameters()}
    for path in ("/nonexistent/adapter", str(adapter)):
        status, body = _reload(server, {"adapter_path": path, "version": 3}, server.api_key)
        assert status == 400, body
        assert body["error"]["code"] == "reload_refused" and "has no LoRA adapter" in body["error"]["message"]
    assert server.service.policy_version is None
    assert all(torch.equal(p, before[n]) for n, p in tiny_model.named_parameters())
    session = server.service.create_session()
    status, body = _reload(server, {"adapter_path": str(adapter)}, session.key)
    assert status == 403 and body["error"]["code"] == "permission_denied"


def test_reload_refuses_a_missing_folder_or_an_adapter_that_does_not_fit(serve, tmp_path, chatml_tokenizer):
    served = lora_policy(chatml_tokenizer).eval()
    server = serve(HFSampler(served, chatml_tokenizer), chatml_tokenizer)
    status, body = _reload(server, {"adapter_path": "/nonexistent/adapter", "version": 1}, server.api_key)
    assert status == 400 and "has no adapter_model.safetensors" in body["error"]["message"]
    other = prepare_policy(build_tiny_llama(len(chatml_tokenizer), seed=0), full_finetune=False, lora_rank=8,
                           lora_alpha=8.0, lora_dropout=0.0, lora_target_modules="all-linear",
                           gradient_checkpointing=False, seed=1, lora_layers=None)
    other.save_pretrained(tmp_path / "rank8")
    before = lora(served)
    status, body = _reload(server, {"adapter_path": str(tmp_path / "rank8"), "version": 2}, server.api_key)
    assert status == 400 and "does not fit the sampled model" in body["error"]["message"], body
    after = lora(served)
    assert all(torch.equal(before[n], after[n]) for n in before)  # all or nothing
    assert server.service.policy_version is None
