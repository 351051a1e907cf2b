"""`mtrl-gym serve --adapter` serves a trained adapter as it was trained: an adapter written by
a real `mtrl-gym train` run (the cpu preset: a prefill that opens a `guess_word` call, stop at
`"`, 6 tokens a turn) behind a real server process, asked by a client written here on
`urllib` alone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request

import pytest

pytest.importorskip("torch")
pytest.importorskip("fastapi")
pytest.importorskip("peft")
pytest.importorskip("yaml")

from tiny_models import build_tiny_llama

from mtrl_gym.error import ConfigError

GUESS_TOOL = {"type": "function", "function": {"name": "guess_word", "description": "Guess a word.",
                                               "parameters": {"type": "object",
                                                              "properties": {"guess": {"type": "string"}},
                                                              "required": ["guess"]}}}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, chatml_tokenizer):
    """``(model_dir, adapter_dir)``: one GRPO step of the cpu preset on the tiny model."""
    from mtrl_gym.cli import main

    root = tmp_path_factory.mktemp("served")
    model_dir = root / "tiny"
    build_tiny_llama(len(chatml_tokenizer), seed=0).save_pretrained(model_dir)
    chatml_tokenizer.save_pretrained(model_dir)
    argv = ["train", "--config", "cpu", "--model", str(model_dir), "--output-dir", str(root / "run"),
            "--max-steps", "1", "--global-batch-size", "2", "--group-size", "2", "--lora.rank", "4",
            "--validation.every", "0", "--checkpoints.save-every", "1", "--no-progress", "--train-size", "4",
            "--val-size", "2", "--set", "tracking.tracker=none"]
    assert main(argv) == 0
    adapter, = sorted((root / "run" / "checkpoints").glob("step_*/adapter"))
    return model_dir, adapter


def _post(url, key, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def _start(kit, model_dir, adapter, *flags):
    """A real ``mtrl-gym serve`` process; ``(proc, url, log)`` once it listens."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "MTRL_GYM_API_KEY": "k-test"}
    cmd = [sys.executable, "-m", "mtrl_gym.cli", "serve", "--model", str(model_dir), "--adapter", str(adapter),
           "--port", "0", "--threads", "1", "--served-model-name", "tiny", *flags]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    log = kit.stderr_until(proc, "Ctrl-C stops")
    found = re.search(r"at (http://127\.0\.0\.1:\d+)/v1", log)
    if found is None:
        proc.kill()
        raise AssertionError(f"the server did not start:\n{log}{proc.stderr.read()}")
    return proc, found.group(1), log


def _stop(proc):
    proc.kill()
    proc.wait(30)
    proc.stderr.close()


def test_the_adapters_prefill_stop_and_turn_length_are_served_and_can_be_overridden(trained, chatml_tokenizer, kit):
    model_dir, adapter = trained
    tokenizer = chatml_tokenizer
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    prefix = GRPOConfig.load("cpu", {}).serving.assistant_prefix
    messages = [{"role": "user", "content": "Guess the word."}]
    proc, url, log = _start(kit, model_dir, adapter)
    try:
        assert f"serving settings of {adapter} from its training run" in log
        assert f"format prefill {prefix!r}, stop ['\"'], max tokens 6" in log
        assert "tool schemas off" in log  # trained reading none: a request's tools are not shown
        shown = [_post(url + "/v1/chat/completions", "k-test", {"model": "tiny", "messages": messages, "seed": 0,
                                                                "return_token_ids": True, **tools})["prompt_token_ids"]
                 for tools in ({"tools": [GUESS_TOOL]}, {})]
        assert shown[0] == shown[1]  # the prompt the model was trained on, with or without `tools`
        assert "guess_word" not in tokenizer.decode(shown[0][:-len(tokenizer.encode(prefix, add_special_tokens=False))])
        for seed in range(4):
            reply = _post(url + "/v1/chat/completions", "k-test",
                          {"model": "tiny", "messages": messages, "tools": [GUESS_TOOL], "seed": seed})
            choice = reply["choices"][0]
            assert reply["usage"]["completion_tokens"] <= 6
            if choice["finish_reason"] == "tool_calls":  # the sampled text closed the guess with `"`
                call, = choice["message"]["tool_calls"]
                assert call["function"]["name"] == "guess_word" and "guess" in json.loads(call["function"]["arguments"])
            else:  # the raw text, which starts with the prefill
                assert choice["message"]["content"].startswith(prefix)
        plain = _post(url + "/v1/completions", "k-test", {"model": "tiny", "prompt": "Guess", "max_tokens": 3,
                                                           "return_token_ids": True})
        assert plain["choices"][0]["prompt_token_ids"] == tokenizer.encode("Guess", add_special_tokens=False)
        reloaded = _post(url + "/admin/reload", "k-test", {"adapter_path": str(adapter), "version": 1})
        assert reloaded == {"adapter_path": str(adapter), "version": 1}  # served as trained: nothing to say
    finally:
        _stop(proc)

    proc, url, log = _start(kit, model_dir, adapter, "--assistant-prefix", "", "--stop", "none", "--max-new-tokens", "3",
                            "--tool-schemas", "on")
    try:
        assert "--assistant-prefix '' overrides the training run's" in log
        assert "--stop [] overrides the training run's ['\"']" in log
        assert "--tool-schemas 'on' overrides the training run's 'off'" in log
        reply = _post(url + "/v1/chat/completions", "k-test", {"model": "tiny", "messages": messages, "seed": 0})
        assert reply["usage"]["completion_tokens"] <= 3
        assert not (reply["choices"][0]["message"]["content"] or "").startswith("<tool_call>")
        offered = _post(url + "/v1/chat/completions", "k-test", {"model": "tiny", "messages": messages, "seed": 0,
                                                                 "tools": [GUESS_TOOL], "return_token_ids": True})
        assert "guess_word" in tokenizer.decode(offered["prompt_token_ids"])
        warning, = _post(url + "/admin/reload", "k-test", {"adapter_path": str(adapter), "version": 2})["warnings"]
        assert "max_new_tokens 3 (trained: 6); assistant_prefix '' (trained: '<tool_call>" in warning
        assert "stop [] (trained: ['\"']); tool_schemas 'on' (trained: 'off')" in warning
        assert "restart it with --adapter" in warning
    finally:
        _stop(proc)


def test_unreadable_training_settings_are_refused_unless_every_served_setting_is_given(tmp_path):
    from mtrl_gym.cli import build_parser
    from mtrl_gym.cli.serve import serve_config

    adapter = tmp_path / "run" / "checkpoints" / "step_000001" / "adapter"
    adapter.mkdir(parents=True)
    (adapter.parent / "config.yaml").write_text("serving: {wrappers: [my_pkg.missing:Wrapper]}\n")

    def config(*flags):
        return serve_config(build_parser().parse_args(["serve", "--adapter", str(adapter), *flags]), log=print)

    with pytest.raises(ConfigError, match=r"not valid .*\(here: --max-new-tokens, --assistant-prefix, --tool-schemas\)$"):
        config("--stop", '"')
    with pytest.raises(ConfigError, match="--stop none means no stop string; it cannot be given with other"):
        config("--stop", "none", "--stop", '"')
    given = config("--assistant-prefix", "Guess: ", "--stop", '"', "--max-new-tokens", "5", "--tool-schemas", "off")
    assert (given.assistant_prefix, given.stop, given.max_new_tokens, given.tool_schemas) == ("Guess: ", ('"',), 5, False)
    bare = serve_config(build_parser().parse_args(["serve"]))
    assert (bare.assistant_prefix, bare.stop, bare.max_new_tokens, bare.tool_schemas) == ("", (), 256, True)
