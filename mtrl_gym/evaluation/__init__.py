"""Evaluate models the way they will be served: outcome success, pass@k, trajectory metrics.

The lesson this package is built around: *evaluate with the settings you will serve with*.
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

>>> from mtrl_gym.evaluation import RunSpec, EvalConfig, evaluate
>>> import tempfile
>>> with tempfile.TemporaryDirectory() as out:
...     result = evaluate("mtrl/Wordle-v0", [RunSpec("solver", policy="solver"), RunSpec("random", policy="random")],
...                       split="val", limit=4, config=EvalConfig(n=2), out_dir=out, report=False)
>>> result.run("solver")["success_rate"]["value"], result.run("random")["success_rate"]["value"]
(1.0, 0.0)

Models (``RunSpec("base:1.0", model="smollm2-135m", serving={"temperature": 1.0})``, ``adapter=``,
``endpoint=``) work the same way; ``mtrl-gym eval`` is the command line
(``mtrl-gym eval --help``). See ``docs/evaluation.md``.

The public names below load their module on first use (``import mtrl_gym.evaluation.tasks``
stays light); one concern per module:

=================  ==============================================================
``specs``          what to evaluate (:class:`RunSpec`) and shared settings (:class:`EvalConfig`)
``tasks``          task files, named splits, early task checks
``scoring``        the external scorer (bare env outcome) and the system-prompt override
``policies``       reference policies (solver, random) and the text-policy episode loop
``backends``       models, adapters and endpoints, with the checks that fail early
``store``          the output folder: streamed JSONL records and resume
``summary``        records -> rates, pass@k, trajectory metrics, comparisons
``training``       training curves and the reward-hacking check
``report``         plots and the markdown report
``tracking``       MLflow logging
``progress``       the progress bar and the time-left line
``runner``         :func:`evaluate`, the pipeline
=================  ==============================================================
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it.
_PUBLIC = {
    "evaluate": "runner", "EvalResult": "runner", "default_out_dir": "runner",
    "EvalConfig": "specs", "RunSpec": "specs", "parse_run": "specs", "POLICIES": "specs",
    "resolve_system_prompt": "specs", "adapter_digest": "specs",
    "ModelPool": "backends", "read_adapter_config": "backends", "adapter_shape_problems": "backends",
    "probe_endpoint": "backends",
    "make_policy": "policies", "RandomToolPolicy": "policies",
    "OutcomeRecorder": "scoring",
    "resolve_tasks": "tasks",
    "read_records": "store", "ResumeMismatch": "store",
    "TrainingCurves": "training", "load_training_curves": "training", "reward_hacking_flags": "training",
    "write_report": "report", "text_table": "report", "render_trajectory": "report",
}
#: Statistics that live in the core (:mod:`mtrl_gym.stats`), offered here too as evaluation reports them.
_STATS = ("pass_at_k", "default_ks", "bootstrap_ci", "paired_bootstrap_ci", "Interval")

__all__ = [*_PUBLIC, *_STATS]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"mtrl_gym.evaluation.{_PUBLIC[name]}"), name)
    if name in _STATS:
        return getattr(importlib.import_module("mtrl_gym.stats"), name)
    raise AttributeError(f"module 'mtrl_gym.evaluation' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
