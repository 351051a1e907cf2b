"""``mtrl-gym export``: a real run folder (two tiny GRPO steps) and a real evaluation of its adapter."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
yaml = pytest.importorskip("yaml")

from tiny_models import build_tiny_llama  # noqa: E402

from mtrl_gym.cli import main  # noqa: E402

GUESS = '<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>'


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, chatml_tokenizer):
    """A run folder of two GRPO steps on Wordle, and an evaluation of its adapter inside it."""
    from mtrl_gym.evaluation import EvalConfig, RunSpec, evaluate
    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

    root = tmp_path_factory.mktemp("export")
    base = root / "base"
    model = build_tiny_llama(len(chatml_tokenizer), seed=0)
    model.save_pretrained(base)
    chatml_tokenizer.save_pretrained(base)
    config = GRPOConfig(env="mtrl/Wordle-v0", model=str(base), output_dir=str(root / "run"), global_batch_size=2,
                        group_size=2, max_steps=2, episode={"max_turns": 2, "max_tokens": 1200},
                        serving={"max_new_tokens": 4, "assistant_prefix": GUESS}, lora={"rank": 4},
                        tracking={"tracker": "none"}, progress=False, validation={"every": 0},
                        checkpoints={"save_every": 0}, seed=0)
    trainer = GRPOTrainer(config, model=model, tokenizer=chatml_tokenizer)
    trainer.train()
    adapter = root / "run" / "checkpoints" / "step_000002" / "adapter"
    runs = [RunSpec("base", model=str(base), serving={"max_new_tokens": 4}),
            RunSpec("trained", adapter=str(adapter), model=str(base), serving={"max_new_tokens": 4}),
            RunSpec("solver", policy="solver")]
    evaluate("mtrl/Wordle-v0", runs, split="val", limit=3, out_dir=root / "run" / "eval",
             config=EvalConfig(n=2, max_turns=6, max_episode_tokens=1500, report_examples=1))
    return root


def front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def test_export_writes_the_peft_folder_and_a_card_whose_eval_table_is_summary_json(trained_run, tmp_path, capsys):
    out = tmp_path / "export"
    assert main(["export", str(trained_run / "run"), "--out", str(out), "--license", "apache-2.0"]) == 0
    adapter = trained_run / "run" / "checkpoints" / "step_000002" / "adapter"
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        assert (out / name).read_bytes() == (adapter / name).read_bytes()
    from peft import PeftModel

    loaded = PeftModel.from_pretrained(build_tiny_llama(_vocab(trained_run), seed=0), str(out))
    assert any("lora_" in n for n, _ in loaded.named_parameters())

    card = (out / "README.md").read_text()
    meta = front_matter(card)
    config = yaml.safe_load((trained_run / "run" / "config.yaml").read_text())
    assert meta["base_model"] == config["model"] and meta["library_name"] == "peft"
    assert meta["license"] == "apache-2.0" and "mtrl/Wordle-v0" in meta["tags"]
    summary = json.loads((trained_run / "run" / "eval" / "summary.json").read_text())
    assert json.loads((out / "eval_summary.json").read_text()) == summary

    # the model-index holds exactly summary.json's numbers, run by run
    results = meta["model-index"][0]["results"]
    assert len(results) == len(summary["runs"])
    for result, (name, run) in zip(results, summary["runs"].items()):
        got = {m["type"]: m["value"] for m in result["metrics"]}
        for key in ("success_rate", "reward"):
            assert got[key] == run[key]["value"]
            assert got[f"{key}_low"] == run[key]["low"] and got[f"{key}_high"] == run[key]["high"]
        assert name in result["task"]["name"]
    # and so does the markdown table
    rows = [line for line in card.splitlines() if re.match(r"^\| (base|trained|solver) \|", line)]
    assert [r.split(" | ")[0].strip("| ") for r in rows] == list(summary["runs"])
    for row, run in zip(rows, summary["runs"].values()):
        cells = [c.strip() for c in row.strip("|").split("|")]
        for cell, key in zip(cells[1:3], ("success_rate", "reward")):
            value, low, high = map(float, re.match(r"(\S+) \[(\S+), (\S+)\]", cell).groups())
            ci = run[key]
            assert (value, low, high) == pytest.approx((ci["value"], ci["low"], ci["high"]), abs=5e-4, rel=5e-4)
        ks = [k for k in run["pass_at_k"] if k != "1"]
        assert [float(c) for c in cells[3:]] == pytest.approx([run["pass_at_k"][k]["value"] for k in ks], abs=5e-4)
    # the word lists' licences ship with it and the card links them
    assert (out / "licenses" / "NOTICE.txt").is_file() and (out / "licenses" / "SCOWL-copyright.txt").is_file()
    assert "[NOTICE.txt](licenses/NOTICE.txt)" in card and "## Training config" in card
    assert yaml.safe_load((out / "training_config.yaml").read_text()) == config
    assert "exported" in capsys.readouterr().err


def _vocab(root) -> int:
    return json.loads((root / "base" / "config.json").read_text())["vocab_size"]


def test_the_eval_report_pairs_base_and_trained_on_the_same_task(trained_run):
    report = (trained_run / "run" / "eval" / "report" / "report.md").read_text()
    section = report.split("## Base vs trained, same task", 1)[1]
    heads = re.findall(r"#### task (\S+) \(#(\d+)\), seed (\d+), sample (\d+)", section)
    assert heads  # one pair per the report's example count
    from mtrl_gym.evaluation.store import read_records

    task_id, index, seed, sample = heads[0]
    for run in ("base", "trained"):
        [r] = [r for r in read_records(trained_run / "run" / "eval" / "trajectories" / f"{run}.jsonl")
               if (r["task_index"], r["sample_index"]) == (int(index), int(sample))]
        assert (r["task_id"], r["seed"]) == (task_id, int(seed))  # same task, same reset seed
        assert f"`{run}`: " in section


def test_push_without_a_token_or_a_network_fails_in_one_line(trained_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no saved login
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    assert main(["export", str(trained_run / "run"), "--out", str(tmp_path / "a"), "--push", "me/tiny"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert err == [f"mtrl-gym export: error: cannot push to me/tiny: no Hugging Face token (set HF_TOKEN or run "
                   f"`huggingface-cli login`); the export is in {tmp_path / 'a'}"]
    assert (tmp_path / "a" / "README.md").is_file()
    assert front_matter((tmp_path / "a" / "README.md").read_text())["model-index"][0]["name"] == "me/tiny"

    # a token but no network: a closed port on 127.0.0.1 stands for the Hub
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    assert main(["export", str(trained_run / "run"), "--out", str(tmp_path / "b"), "--push", "me/tiny"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    [err] = [line for line in lines if "error" in line]
    assert err.startswith("mtrl-gym export: error: cannot push to me/tiny: ") and "the export is in" in err
    assert "Traceback" not in "\n".join(lines)


def test_export_refuses_what_is_not_a_run_folder_or_a_used_output(trained_run, tmp_path, capsys):
    assert main(["export", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "holds no config.yaml" in capsys.readouterr().err
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "f").write_text("x")
    assert main(["export", str(trained_run / "run"), "--out", str(tmp_path / "used")]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert main(["export", str(trained_run / "run"), "--out", str(tmp_path / "y"), "--eval", str(tmp_path)]) == 2
    assert "holds no summary.json" in capsys.readouterr().err
