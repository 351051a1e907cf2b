"""docs/architecture.md against the code: the third-party env example works end to end."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import gymnasium
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _doc_block(marker: str) -> str:
    """The ```python block of the doc that contains ``marker``."""
    blocks = [b.split("```", 1)[0] for b in DOC.split("```python")[1:]]
    (code,) = [b for b in blocks if marker in b]
    return code


@pytest.fixture(scope="module")
def guess_env():
    code = _doc_block("class GuessEnv")
    scope: dict = {}
    exec(compile(code, "docs/architecture.md", "exec"), scope)  # noqa: S102 - our own documentation
    yield scope
    gymnasium.registry.pop("my_pkg/Guess-v0", None)


def test_the_toy_rollout_source_of_the_doc_trains_one_step(tmp_path, chatml_tokenizer):
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from tiny_models import build_tiny_llama

    scope: dict = {}
    exec(compile(_doc_block("class TwoRepliesSource"), "docs/architecture.md", "exec"), scope)  # noqa: S102
    model = build_tiny_llama(len(chatml_tokenizer), seed=0)
    metrics = scope["train_one_step"](model, chatml_tokenizer, str(tmp_path / "toy"))
    assert metrics["rollout/episodes"] == 4 and metrics["rollout/reward_mean"] == 0.5
    assert metrics["train/trained_tokens"] > 0 and metrics["train/sequences"] == 4
    lora = {n: p for n, p in model.named_parameters() if "lora_B" in n}  # LoRA B starts at zero
    assert lora and any(not torch.equal(p, torch.zeros_like(p)) for p in lora.values())  # one update moved it


def test_the_source_table_lists_every_source():
    from mtrl_gym.rollout.sources.factory import SOURCES

    rows = {line.split("`")[1] for line in DOC.splitlines() if line.startswith("| `") and "| `rollout." in line}
    assert rows == set(SOURCES)


def test_a_third_party_env_gets_splits_policies_and_evaluation_through_its_profile(guess_env, tmp_path):
    from mtrl_gym.evaluation import EvalConfig, RunSpec, evaluate
    from mtrl_gym.evaluation.tasks import split_names
    from mtrl_gym.trainers.grpo.data import load_task_splits

    assert split_names("my_pkg/Guess-v0") == ["train", "val", "seeds:N"]
    train, val = load_task_splits("my_pkg/Guess-v0", None, None, train_size=6, val_size=3, split_seed=1)
    assert len(train) == 6 and len(val) == 3 and {t["id"] for t in train}.isdisjoint(t["id"] for t in val)
    result = evaluate("my_pkg/Guess-v0", [RunSpec("solver", policy="solver"), RunSpec("random", policy="random")],
                      split="val", limit=5, config=EvalConfig(n=1), out_dir=tmp_path, report=False)
    assert result.run("solver")["success_rate"]["value"] == 1.0
    from env_checks import strict_check_env

    strict_check_env(guess_env["GuessEnv"]())
    from mtrl_gym.envs.profile import profile_of
    from mtrl_gym.error import ConfigError

    with pytest.raises(ConfigError, match="split 'val' is held out for evaluation"):
        profile_of("my_pkg/Guess-v0").training_tasks("val")


def test_an_env_without_a_profile_gets_the_default():
    from mtrl_gym.envs.profile import profile_of

    class Bare(gymnasium.Env):
        success_threshold = 0.5

    p = profile_of(Bare)
    assert p.splits == {} and p.reference_policies == {} and p.success_threshold == 0.5
    assert p.shaping_limits is None


def test_layer_doc_names_the_test():
    assert "tests/test_layers.py" in DOC
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.import_module("mtrl_gym.rollout.engine")


def test_the_trainer_refuses_evaluation_only_envs_and_rows(tmp_path):
    from mtrl_gym.datasets import write_tasks
    from mtrl_gym.envs.profile import EnvProfile
    from mtrl_gym.error import ConfigError
    from mtrl_gym.trainers.grpo.data import load_task_splits

    class Benchmark(gymnasium.Env):
        @classmethod
        def profile(cls):
            return EnvProfile(evaluation_only=True)

    gymnasium.register("my_pkg/Bench-v0", entry_point=Benchmark)
    try:
        with pytest.raises(ConfigError, match="my_pkg/Bench-v0 is for evaluation only"):
            load_task_splits("my_pkg/Bench-v0", None, None, train_size=1, val_size=1, split_seed=0)
    finally:
        gymnasium.registry.pop("my_pkg/Bench-v0", None)
    write_tasks([{"prompt": "p", "answer": "paste", "id": "a", "evaluation_only": True}], tmp_path / "t.jsonl")
    with pytest.raises(ConfigError, match="row 1 is marked evaluation_only"):
        load_task_splits("mtrl/Wordle-v0", str(tmp_path / "t.jsonl"), None, train_size=1, val_size=1, split_seed=0)
