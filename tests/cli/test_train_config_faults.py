"""Config problems found before a run loads anything: a group of one rollout, and a hub model id
that no cache holds and no reachable hub knows (one line, no long retry), tested against a real
stand-in hub on 127.0.0.1 and a closed port."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mtrl_gym.cli import main
from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.grpo.config import GRPOConfig


def _errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line]


# ------------------------------------------------------------------------------------ group_size

def test_group_size_1_is_refused_unless_zero_signal_is_allowed():
    with pytest.raises(ConfigError, match=r"`group_size` is 1: every group has a single rollout, so every "
                                          r"advantage is 0 .* use group_size >= 2 .* allow_zero_signal: true"):
        GRPOConfig(global_batch_size=2, group_size=1, max_steps=1)
    cfg = GRPOConfig(global_batch_size=2, group_size=1, max_steps=1, allow_zero_signal=True)
    assert cfg.group_size == 1 and GRPOConfig.from_dict(cfg.to_dict()).allow_zero_signal
    assert GRPOConfig(global_batch_size=2, group_size=2, max_steps=1).group_size == 2


def test_train_with_group_size_1_fails_in_one_line_before_loading(tmp_path, capsys, no_model_load):
    assert main(["train", "--group-size", "1", "--output-dir", str(tmp_path / "run"), "--no-progress"]) == 2
    errors = _errors(capsys)
    assert len(errors) == 1 and "`group_size` is 1" in errors[0], errors


# ------------------------------------------------------------------------------------ hub ids

class _Hub(BaseHTTPRequestHandler):
    """A stand-in hub: ``/api/models/org/known`` exists, every other model is not found."""

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path.split("?")[0] == "/api/models/org/known":
            body, status, headers = json.dumps({"id": "org/known", "sha": "0" * 40}).encode(), 200, {}
        else:
            body, status = json.dumps({"error": "Repository not found"}).encode(), 404
            headers = {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"}
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", "Content-Length": str(len(body)), **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """The stand-in hub on 127.0.0.1 and an empty hub cache; yields its URL."""
    from huggingface_hub import constants

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    yield url
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_hub_id_the_hub_does_not_know_is_one_line(hub):
    from mtrl_gym.models import check_hub_model

    assert check_hub_model("org/known") == "hub"
    with pytest.raises(ConfigError, match=rf"model 'nosuchorg/nosuchmodel-xyz': no such model on {hub}"):
        check_hub_model("nosuchorg/nosuchmodel-xyz")


def test_an_unreachable_hub_is_one_line_at_once_in_train(hub, monkeypatch, tmp_path, capsys, no_model_load):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    started = time.monotonic()
    assert main(["train", "--model", "nosuchorg/nosuchmodel-xyz", "--output-dir", str(tmp_path / "run"),
                 "--no-progress"]) == 2
    took = time.monotonic() - started
    errors = _errors(capsys)
    assert len(errors) == 1, errors
    assert errors[0].startswith("mtrl-gym train: error: model 'nosuchorg/nosuchmodel-xyz' is not in the local "
                                "Hugging Face cache (") and "cannot be reached" in errors[0], errors
    assert "give a local model folder" in errors[0] and took < 20, took


def test_a_cached_hub_id_needs_no_hub(hub, monkeypatch, tmp_path):
    from huggingface_hub import constants

    from mtrl_gym.models import check_hub_model

    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    repo = tmp_path / "hub-cache" / "models--org--cached"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("a" * 40)
    (repo / "snapshots" / ("a" * 40)).mkdir(parents=True)
    (repo / "snapshots" / ("a" * 40) / "config.json").write_text("{}")
    assert check_hub_model("org/cached") == "cache"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert check_hub_model("org/cached") == "cache"
    with pytest.raises(ConfigError, match=r"model 'org/other' is not in the local Hugging Face cache .* and "
                                          r"HF_HUB_OFFLINE is set"):
        check_hub_model("org/other")
