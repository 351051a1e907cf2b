"""``serving.wrappers``: what the policy reads travels with the adapter.

An adapter trained on observations that end with a recap line (``WordleRecap``) and a run's
own system prompt must be evaluated with both. These tests make the data, train (a tiny
model, the real SFT trainer), and read the run folder back the way ``mtrl-gym eval --adapter``
does, then play the evaluation and look at the text the model was given.
"""

from __future__ import annotations

import pytest
from tiny_models import build_tiny_llama

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.serving import ServingSettings

pytest.importorskip("yaml")

PREFIX = '<tool_call>{"name": "guess_word", "arguments": {"guess": "'
RECAP = {"name": "WordleRecap", "kwargs": {}}
PROMPT = {"name": "SystemPrompt", "kwargs": {"text": "Play Wordle.", "tools": False}}


def _guess(word: str) -> str:
    return f'{PREFIX}{word}"}}}}</tool_call>'


def _cli_runs(*argv, out=None):
    from mtrl_gym.cli import build_parser
    from mtrl_gym.cli.eval import build_runs

    logged: list[str] = []
    runs = build_runs(build_parser().parse_args(["eval", *argv]), out, log=logged.append)
    return runs, "\n".join(logged)


def _before_each_guess(messages) -> list[str]:
    """The text the model read just before each of its turns."""
    return [before["content"] for before, m in zip(messages, messages[1:]) if m["role"] == "assistant"]


# ---------------------------------------------------------------------------- the setting


def test_serving_wrappers_take_names_or_specs_and_refuse_what_is_not_only_a_view(tmp_path):
    s = ServingSettings(wrappers=["WordleRecap"])
    assert s.wrappers == [RECAP] and ServingSettings(wrappers=RECAP).wrappers == [RECAP]
    s.save(tmp_path / "serving.yaml")
    assert ServingSettings.load(tmp_path / "serving.yaml").wrappers == [RECAP]  # saved with the run
    with pytest.raises(ConfigError, match="'WordleShaping' may change more than what the policy reads.*env_wrappers"):
        ServingSettings(wrappers=["WordleShaping"])
    with pytest.raises(ConfigError, match="unknown env wrapper 'WordleRecapp'.*Did you mean 'WordleRecap'"):
        ServingSettings(wrappers=["WordleRecapp"])
    with pytest.raises(ConfigError, match=r"`wrappers\[0\]`: kwargs \{'lines': 2\} do not fit 'WordleRecap'"):
        ServingSettings(wrappers=[{"name": "WordleRecap", "kwargs": {"lines": 2}}])
    with pytest.raises(ConfigError, match=r"`wrappers\[1\]` has unknown key\(s\) \['kw'\]"):
        ServingSettings(wrappers=["WordleRecap", {"name": "WordleRecap", "kw": {}}])
    assert ServingSettings(wrappers="None").wrappers == []  # `--set serving.wrappers=none`
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    config = GRPOConfig.load("cpu-sft", overrides=["serving.wrappers=[WordleRecap]"])  # `--set` in a train call
    assert config.serving.wrappers == [RECAP]
    with pytest.raises(ConfigError, match=r"\['WordleRecap'\] is in both `env_wrappers` and `serving.wrappers`, so "
                                          "the policy would read its line twice"):
        config.replace(env_wrappers=[*config.env_wrappers, RECAP])


def test_the_recap_is_read_after_the_env_wrappers_and_before_the_system_prompt():
    """Outside the run's env wrappers: the recap knows the words PriorGuesses played."""
    import gymnasium

    import mtrl_gym  # noqa: F401
    from mtrl_gym.wrappers import PriorGuesses

    env = PriorGuesses(gymnasium.make("mtrl/Wordle-v0"), num_priors=1, policy="random")
    wrappers = ServingSettings(wrappers=["WordleRecap"], system_prompt="none").env_wrappers()
    assert len(wrappers) == 2  # the recap, then the system prompt outermost
    for wrap in wrappers:
        env = wrap(env)
    obs, info = env.reset(seed=0, options={"answer": "shard"})
    prior = info["prior_guesses"][0]["guess"]
    assert obs.count("Recap:") == 1 and info["system_prompt"] == ""
    assert obs.splitlines()[-1] != "Recap: gray -; yellow -; green _ _ _ _ _"  # it read the pre-played word
    assert set(obs.splitlines()[-1].split("gray ")[1].split(";")[0].split()) <= set(prior.upper())
    obs = env.step(_guess("crane"))[0]
    assert obs.count("Recap:") == 1 and obs.splitlines()[-1].split("green ")[1].split()[2] == "A"


def test_a_multi_agent_run_refuses_serving_wrappers():
    pytest.importorskip("pettingzoo")
    from mtrl_gym.rollout.sources.multiagent import SelfPlayOptions, make_selfplay_engine
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    config = GRPOConfig.load("cpu", {"env": "mtrl/WordleDuel-v0", "env_wrappers": [], "validation": {"env_wrappers": []},
                                     "serving": {"wrappers": ["WordleRecap"]}})
    with pytest.raises(ConfigError, match=r"serving.wrappers \['WordleRecap'\] are for single-agent envs"):
        make_selfplay_engine(config, SelfPlayOptions(), None, None)


# ---------------------------------------------------------------------------- demonstrations


def test_demonstrations_apply_the_serving_prompt_and_wrappers(tmp_path, chatml_tokenizer):
    """Before, a DemoConfig's ``serving.system_prompt`` and ``tools`` were silently ignored."""
    from mtrl_gym.trainers.demos import DemoConfig, make_demos

    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Guess the word.\n", encoding="utf-8")
    config = DemoConfig(num_episodes=2, serving={"assistant_prefix": PREFIX, "stop": ['"'], "tools": False,
                                                 "system_prompt": str(prompt), "wrappers": ["WordleRecap"]})
    for t in make_demos(config, chatml_tokenizer):
        assert t.messages[0] == {"role": "system", "content": "Guess the word."}
        read = _before_each_guess(t.messages)
        assert len(read) >= 2 and all(text.splitlines()[-1].startswith("Recap: gray ") for text in read)
        assert all(text.count("Recap:") == 1 for text in read)


# ---------------------------------------------------------------------------- read back by `mtrl-gym eval`


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory, chatml_tokenizer):
    """The real SFT trainer on demonstrations made with the run's prompt (an env wrapper, as the
    cpu-sft preset gives it) and the recap (a serving wrapper): the adapter and its folder."""
    from mtrl_gym.trainers.demos import DemoConfig, make_demos, write_demos
    from mtrl_gym.trainers.sft.config import SFTConfig
    from mtrl_gym.trainers.sft.trainer import SFTTrainer

    root = tmp_path_factory.mktemp("sft-recap")
    config = DemoConfig(num_episodes=2, env_wrappers=[PROMPT], serving={
        "assistant_prefix": PREFIX, "stop": ['"'], "max_new_tokens": 6, "wrappers": ["WordleRecap"]})
    trajectories = make_demos(config, chatml_tokenizer)
    demos = write_demos(trajectories, root / "d.jsonl", config)
    sft = SFTConfig(demos=[str(demos)], output_dir=str(root / "sft"), batch_size=2, max_steps=1,
                    lora={"rank": 4, "alpha": 8}, tracking={"tracker": "none"}, progress=False)
    adapter = SFTTrainer(sft, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                         demos=trajectories).train()["adapter"]
    return root, adapter


def test_an_sft_adapter_is_evaluated_with_its_prompt_and_recap(sft_run, chatml_tokenizer):
    from mtrl_gym.evaluation import EvalConfig, RunSpec, evaluate, read_records
    from mtrl_gym.rollout.samplers.hf import HFSampler

    root, adapter = sft_run
    runs, log = _cli_runs("--model", "m", "--adapter", str(adapter), out=str(root / "eval"))
    for spec in runs:  # base and trained alike
        assert spec.serving.wrappers == [RECAP] and spec.serving.tools is False
        assert open(spec.serving.system_prompt, encoding="utf-8").read().rstrip("\n") == "Play Wordle."
    assert "wrappers WordleRecap" in log and "system prompt the run's own (12 characters)" in log
    trained = runs[1]
    model = build_tiny_llama(len(chatml_tokenizer), seed=0)
    spec = RunSpec("trained", sampler=HFSampler(model, chatml_tokenizer), tokenizer=chatml_tokenizer,
                   serving=trained.serving)
    evaluate("mtrl/Wordle-v0", [spec], split="val", limit=1, out_dir=root / "eval",
             config=EvalConfig(n=1, max_turns=2, batch_tasks=1), report=False)
    record = read_records(root / "eval" / "trajectories" / "trained.jsonl")[0]
    assert record["messages"][0] == {"role": "system", "content": "Play Wordle."}
    read = _before_each_guess(record["messages"])
    assert read and all(text.splitlines()[-1].startswith("Recap: gray ") and text.count("Recap:") == 1
                        for text in read)


def test_the_wrapper_flag_overrides_what_the_adapter_was_trained_with(sft_run, capsys):
    from mtrl_gym.cli import main

    root, adapter = sft_run
    runs, log = _cli_runs("--adapter", str(adapter), "--wrapper", "none")
    assert runs[0].serving.wrappers == []
    assert "--wrapper none overrides how trained was trained (WordleRecap)" in log
    runs, log = _cli_runs("--policy", "random", "--wrapper", '{"name": "WordleRecap"}')
    assert runs[0].serving.wrappers == [RECAP] and not log
    for bad, message in [("WordleShaping", "`--wrapper`: 'WordleShaping' may change more"),
                         ("{nope", "--wrapper must be a wrapper name or a JSON object"),
                         ("none", "--wrapper none means no wrapper; it cannot be given with other")]:
        extra = ["--wrapper", "WordleRecap"] if bad == "none" else []
        assert main(["eval", "--policy", "random", "--wrapper", bad, *extra, "--out", str(root / "refused"),
                     "--no-mlflow", "--quiet"]) == 2
        assert message in capsys.readouterr().err
    assert not (root / "refused" / "summary.json").exists()


def test_a_grpo_run_is_read_back_from_its_serving_wrappers_or_its_env_wrappers(tmp_path):
    from mtrl_gym.evaluation.serving import training_serving
    from mtrl_gym.rollout.serving import SERVING_FILE
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    for name, overrides in [("serving", {"serving": {"wrappers": [RECAP]}}),
                            ("before-the-field", {"env_wrappers": [*GRPOConfig.load("cpu-sft").env_wrappers, RECAP]})]:
        config = GRPOConfig.load("cpu-sft", {"output_dir": str(tmp_path / name), **overrides})
        step = tmp_path / name / "checkpoints" / "step_000002"
        (step / "adapter").mkdir(parents=True)
        config.save(step / "config.yaml")
        config.serving.save(tmp_path / name / SERVING_FILE)
        settings, _ = training_serving(step / "adapter")
        assert settings["wrappers"] == [RECAP] and settings["tools"] is False, name
    plain = GRPOConfig.load("cpu-sft", {"output_dir": str(tmp_path / "plain")})
    (tmp_path / "plain" / "adapter").mkdir(parents=True)
    plain.save(tmp_path / "plain" / "config.yaml")
    assert training_serving(tmp_path / "plain" / "adapter")[0]["wrappers"] == []


def test_a_run_without_wrappers_keeps_the_record_an_older_evaluation_resumes_against():
    from mtrl_gym.evaluation import RunSpec

    assert "wrappers" not in RunSpec("m", model="m").describe()
    assert RunSpec("m", model="m", serving={"wrappers": ["WordleRecap"]}).describe()["wrappers"] == [RECAP]


def test_an_sft_config_with_its_own_serving_still_saves_what_the_demonstrations_were_read_through(
        sft_run, chatml_tokenizer):
    """`mtrl-gym sft --set serving.max_new_tokens=8`: the adapter learnt from recap text all the same."""
    from mtrl_gym.rollout.serving import load_serving
    from mtrl_gym.trainers.sft.config import SFTConfig
    from mtrl_gym.trainers.sft.trainer import SFTTrainer

    root, _ = sft_run
    sft = SFTConfig(demos=[str(root / "d.jsonl")], output_dir=str(root / "sft-own"), max_steps=1, progress=False,
                    serving={"assistant_prefix": PREFIX, "stop": ['"'], "max_new_tokens": 8},
                    tracking={"tracker": "none"})
    from mtrl_gym.rollout.trajectory import load_jsonl

    trainer = SFTTrainer(sft, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                         demos=load_jsonl(root / "d.jsonl"))
    assert trainer.serving().wrappers == [RECAP] and trainer.serving().max_new_tokens == 8
    trainer.serving().save(root / "sft-own" / "serving.yaml")
    assert load_serving(root / "sft-own").wrappers == [RECAP]


def test_an_sft_run_made_with_relative_paths_is_read_back_from_anywhere(tmp_path, monkeypatch, chatml_tokenizer):
    from mtrl_gym.evaluation.serving import training_serving
    from mtrl_gym.trainers.demos import DemoConfig, make_demos, write_demos
    from mtrl_gym.trainers.sft.config import SFTConfig

    project = tmp_path / "project"
    (project / "runs").mkdir(parents=True)
    monkeypatch.chdir(project)  # `mtrl-gym demos --out runs/d.jsonl`, `mtrl-gym sft --out runs/sft`, from here
    config = DemoConfig(num_episodes=1, env_wrappers=[PROMPT], serving={"assistant_prefix": PREFIX, "stop": ['"']})
    write_demos(make_demos(config, chatml_tokenizer), "runs/d.jsonl", config)
    SFTConfig(demos=["runs/d.jsonl"], output_dir="runs/sft").save(project / "runs" / "sft" / "config.yaml")
    adapter = project / "runs" / "sft" / "checkpoints" / "step_000001" / "adapter"
    adapter.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)  # `mtrl-gym eval --adapter project/runs/sft/...` from elsewhere
    settings, _ = training_serving(adapter)
    assert settings["system_prompt_text"] == "Play Wordle." and settings["tools"] is False
    (project / "runs" / "d.jsonl.meta.json").unlink()
    with pytest.warns(UserWarning, match=r"demonstration record 'runs/d.jsonl.meta.json' is not found.*--system-prompt"):
        settings, _ = training_serving(adapter)
    assert settings["system_prompt_text"] is None


def test_the_demos_cli_sends_a_view_wrapper_to_the_serving_settings(tmp_path):
    from mtrl_gym.cli import main
    from mtrl_gym.trainers.demos import read_demo_meta

    out = tmp_path / "d.jsonl"
    prior = '{"name": "PriorGuesses", "kwargs": {"num_priors": 1, "policy": "random"}}'
    assert main(["demos", "--config", "cpu-sft", "-n", "1", "--max-turns", "1", "--wrapper", prior,
                 "--wrapper", "WordleRecap", "--out", str(out)]) == 0
    made = read_demo_meta(out)["config"]
    assert [w["name"] for w in made["env_wrappers"]] == ["SystemPrompt", "PriorGuesses"]
    assert made["serving"]["wrappers"] == [RECAP]


def test_matches_on_a_multi_agent_env_refuse_serving_wrappers(tmp_path):
    pytest.importorskip("pettingzoo")
    from mtrl_gym.evaluation import RunSpec
    from mtrl_gym.evaluation.matches import evaluate_matches

    run = RunSpec("trained", model="m", serving={"wrappers": ["WordleRecap"]})
    with pytest.raises(ConfigError, match=r"serving wrappers \['WordleRecap'\] are for single-agent envs.*--wrapper none"):
        evaluate_matches("mtrl/WordleDuel-v0", [run], out_dir=tmp_path)
