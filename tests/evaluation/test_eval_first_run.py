"""An evaluation a new user can run: the adapter served as trained, a used --out refused,
progress that moves with tokens, an estimate, and plots whose zero bars and lines are seen."""

from __future__ import annotations

import pytest

from mtrl_gym.error import ConfigError

pytest.importorskip("yaml")


def _cli_runs(*argv, out=None):
    from mtrl_gym.cli import build_parser
    from mtrl_gym.cli.eval import build_runs

    logged: list[str] = []
    runs = build_runs(build_parser().parse_args(["eval", *argv]), out, log=logged.append)
    return runs, "\n".join(logged)


def _trained_run(tmp_path):
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    config = GRPOConfig.load("cpu", {"output_dir": str(tmp_path / "run")})
    step = tmp_path / "run" / "checkpoints" / "step_000005"
    (step / "adapter").mkdir(parents=True)
    config.save(step / "config.yaml")
    return config, step / "adapter"


def test_an_adapter_is_served_as_it_was_trained_and_overrides_are_reported(tmp_path):
    config, adapter = _trained_run(tmp_path)
    runs, log = _cli_runs("--model", "smollm2-135m", "--adapter", str(adapter), out=str(tmp_path / "eval"))
    prompt = config.env_wrappers[0]["kwargs"]["text"]
    for spec in runs:  # base and trained alike, so the comparison is fair
        assert (spec.serving.max_new_tokens, spec.serving.assistant_prefix, spec.serving.stop,
                spec.serving.tools) == (6, config.serving.assistant_prefix, ['"'], False)
        assert open(spec.serving.system_prompt, encoding="utf-8").read().rstrip("\n") == prompt
    assert f"serving settings of {adapter} from its training run ({adapter.parent / 'config.yaml'})" in log
    runs, log = _cli_runs("--model", "m", "--adapter", str(adapter), "--max-tokens", "32", "--tools",
                          out=str(tmp_path / "eval"))
    assert runs[1].serving.max_new_tokens == 32 and runs[1].serving.tools is True
    assert runs[1].serving.assistant_prefix == config.serving.assistant_prefix
    assert "--max-tokens 32 overrides how trained was trained (6)" in log
    assert "--tools/--no-tools True overrides how trained was trained (False)" in log
    plain, log = _cli_runs("--model", "m", "--adapter", str(tmp_path / "elsewhere"))  # no training config
    assert (plain[1].serving.max_new_tokens, plain[1].serving.system_prompt, plain[1].serving.tools) == (
        256, "default", True) and not log


def test_a_used_eval_folder_is_refused_unless_resumed_or_overwritten(tmp_path, capsys):
    from mtrl_gym.cli import main

    argv = ["eval", "--policy", "random", "--limit", "2", "-n", "1", "--out", str(tmp_path / "ev"), "--no-mlflow",
            "--quiet"]
    assert main(argv) == 0
    assert main(argv) == 2
    assert "already holds a run (eval_config.json, summary.json): continue it with --resume, replace it with " \
           "--overwrite, or give a fresh --out" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    assert main([*argv, "--resume"]) == 0


from mtrl_gym.rollout.samplers.base import Sampler  # noqa: E402


class _Sampler(Sampler):
    """Reports tokens through ``on_tokens`` three times per call, as the HF sampler does while decoding."""

    def __init__(self, tokenizer):
        self.on_tokens = None
        self.tok = tokenizer
        self.seen: list[tuple[int, int]] = []  # (turns, tokens) the progress showed at each call
        self.progress = None

    def sample(self, requests):
        from mtrl_gym.rollout.samplers.base import SampleResult

        for _ in range(3):
            self.on_tokens(len(requests))
        self.seen.append((self.progress.turns, self.progress.tokens))
        ids = self.tok.encode("ok", add_special_tokens=False) + [self.tok.eos_token_id]
        return [SampleResult(ids, [-0.5] * len(ids), "stop", prompt_tokens=len(r.prompt_ids)) for r in requests]


def test_progress_counts_turns_and_tokens_while_sampling_and_estimates_the_rest():
    pytest.importorskip("transformers")
    from tiny_models import build_chatml_tokenizer
    from toy_envs import VowelEnv

    from mtrl_gym.evaluation.progress import EvalProgress
    from mtrl_gym.rollout.engine import RolloutEngine

    tokenizer = build_chatml_tokenizer()
    sampler = _Sampler(tokenizer)
    progress = EvalProgress("trained:1.0", 8, enabled=False)
    sampler.progress = progress
    with RolloutEngine(VowelEnv, sampler, tokenizer, observers=[progress]) as engine:
        engine.collect([{"id": "a", "turns": 2}, {"id": "b", "turns": 1}], seed=0)  # turns of 2 then 1 episodes
    assert sampler.seen == [(2, 6), (3, 9)]  # the bar moved during each sampler call
    assert (progress.turns, progress.tokens, progress.done) == (3, 9, 0)  # moved before any episode ended
    progress.episode_done(5)
    progress.episode_done(4)
    line = progress.batch_done()
    assert "sample" not in vars(sampler) and sampler.on_tokens is None  # the sampler is left as it was
    assert line.startswith("trained:1.0: 2 of 8 episodes in ") and "the other 6 should take about" in line
    assert "--limit N and -n N shorten the run" in line
    assert progress.batch_done() is None  # once per run


def _summary(rates):
    interval = lambda v: {"value": v, "low": v, "high": v}  # noqa: E731
    return {"env_id": "mtrl/Wordle-v0", "tasks": 4, "samples_per_task": 2,
            "runs": {name: {"success_rate": interval(v), "pass_at_k": {"1": interval(v), "2": interval(v)}}
                     for name, v in rates.items()}}


def test_zero_bars_are_visible_and_the_axis_reads_in_percent():
    pytest.importorskip("matplotlib")
    from mtrl_gym.evaluation.report import pass_at_k_figure

    fig = pass_at_k_figure(_summary({"base:1.0": 0.0, "trained:1.0": 0.25, "solver": 1.0}))
    ax = fig.axes[0]
    strokes = [line for line in ax.lines if line.get_gid() == "zero-bar"]
    assert len(strokes) == 2 and all(s.get_linewidth() >= 3 and s.get_ydata().tolist() == [0, 0] for s in strokes)
    assert ax.get_ylabel() == "tasks solved (success, pass@k)" and ax.get_ylim()[0] < 0
    assert ax.yaxis.get_major_formatter()(0.5, 0) == "50%"
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_runs_with_the_same_success_rate_share_one_labelled_line():
    from mtrl_gym.evaluation.report import _level_lines

    assert _level_lines(_summary({"base:1.0": 0.0, "trained:1.0": 0.0, "random": 0.0, "solver": 1.0})["runs"]) == [
        (0.0, ["base:1.0", "trained:1.0", "random"]), (1.0, ["solver"])]


def test_an_unreadable_training_config_is_a_clear_error(tmp_path):
    from mtrl_gym.evaluation.serving import training_serving

    (tmp_path / "adapter").mkdir()
    (tmp_path / "config.yaml").write_text("a: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        training_serving(tmp_path / "adapter")


def test_unreadable_training_settings_need_every_serving_flag_and_then_are_not_read(tmp_path):
    adapter = tmp_path / "run" / "checkpoints" / "step_000001" / "adapter"
    adapter.mkdir(parents=True)
    (adapter.parent / "config.yaml").write_text("serving: {wrappers: [my_pkg.missing:Wrapper]}\n")
    with pytest.raises(ConfigError, match=r"not valid .*\(here: --system-prompt, --tools/--no-tools, --wrapper\)"):
        _cli_runs("--model", "m", "--adapter", str(adapter), "--max-tokens", "6", "--assistant-prefix", "G: ",
                  "--stop", '"')
    runs, log = _cli_runs("--model", "m", "--adapter", str(adapter), "--max-tokens", "6", "--assistant-prefix", "G: ",
                          "--stop", '"', "--system-prompt", "none", "--no-tools", "--wrapper", "none")
    assert (runs[1].serving.max_new_tokens, runs[1].serving.assistant_prefix, runs[1].serving.stop) == (6, "G: ", ['"'])
    assert "were not read" in log and "every one is given as a flag" in log
