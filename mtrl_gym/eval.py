"""Evaluate models the way they will be served: outcome success, pass@k, trajectory metrics.

The lesson this module is built around: *evaluate with the settings you will serve with*.
The same adapter can score 37% on a temperature-0 validation curve and 84% at serving
temperature 1.0, and a shaped training reward can rise while the real success rate falls.
So an evaluation here

* runs each model (a base checkpoint, a LoRA adapter, an OpenAI-compatible endpoint) with
  explicit serving settings — temperature, top_p, max tokens, system-prompt variant — and
  ``n`` samples per task, on identical tasks and reset seeds for every run;
* scores with the bare environment's outcome (Wordle: solved), never with a shaping
  wrapper's reward, and reports success rate, mean reward and pass@k (unbiased estimator)
  with bootstrap intervals over tasks, plus turns, tool calls, format-error and
  invalid-action rates, tokens per episode and the failure rate;
* places every model between two reference rows, the env's solver and a random policy;
* writes a JSON summary, one JSONL of episodes per run (appended as episodes finish, so a
  crash loses little and ``resume=True`` continues), PNG plots and a markdown report with
  full trajectories, optionally logs to MLflow, and flags a training run whose reward
  rose while the external success metric fell.

>>> from mtrl_gym.eval import RunSpec, EvalConfig, evaluate
>>> import tempfile
>>> with tempfile.TemporaryDirectory() as out:
...     result = evaluate("mtrl/Wordle-v0", [RunSpec("solver", policy="solver"), RunSpec("random", policy="random")],
...                       split="val", limit=4, config=EvalConfig(n=2), out_dir=out, report=False)
>>> result.run("solver")["success_rate"]["value"], result.run("random")["success_rate"]["value"]
(1.0, 0.0)

Models (``RunSpec("base:1.0", model="smollm2-135m", temperature=1.0)``, ``adapter=``,
``endpoint=``) work the same way; ``mtrl-gym eval`` is the command line
(``mtrl-gym eval --help``). See ``docs/evaluation.md``.
"""

from __future__ import annotations

from mtrl_gym.evaluation.backends import ModelPool, adapter_shape_problems, probe_endpoint, read_adapter_config
from mtrl_gym.evaluation.policies import RandomToolPolicy, make_policy
from mtrl_gym.evaluation.report import render_trajectory, text_table, write_report
from mtrl_gym.evaluation.runner import EvalResult, default_out_dir, evaluate
from mtrl_gym.evaluation.scoring import OutcomeRecorder
from mtrl_gym.evaluation.specs import POLICIES, EvalConfig, RunSpec, parse_run, resolve_system_prompt
from mtrl_gym.stats import Interval, bootstrap_ci, default_ks, paired_bootstrap_ci, pass_at_k
from mtrl_gym.evaluation.store import read_records
from mtrl_gym.evaluation.tasks import resolve_tasks
from mtrl_gym.evaluation.training import TrainingCurves, load_training_curves, reward_hacking_flags

__all__ = [
    "evaluate", "EvalResult", "EvalConfig", "RunSpec", "parse_run", "default_out_dir", "POLICIES",
    "pass_at_k", "default_ks", "bootstrap_ci", "paired_bootstrap_ci", "Interval",
    "ModelPool", "read_adapter_config", "adapter_shape_problems", "probe_endpoint",
    "make_policy", "RandomToolPolicy",
    "OutcomeRecorder", "resolve_system_prompt", "resolve_tasks", "read_records",
    "TrainingCurves", "load_training_curves", "reward_hacking_flags",
    "write_report", "text_table", "render_trajectory",
]
