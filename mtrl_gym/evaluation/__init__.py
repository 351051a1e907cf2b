"""Evaluation internals, one concern per module; the public entry point is :mod:`mtrl_gym.eval`.

=============  ==============================================================
``specs``      what to evaluate (:class:`RunSpec`) and shared settings (:class:`EvalConfig`)
``tasks``      task files, named splits, early task checks
``scoring``    the external scorer (bare env outcome) and the system-prompt override
``policies``   reference policies (solver, random) and the text-policy episode loop
``backends``   models, adapters and endpoints, with the checks that fail early
``store``      the output folder: streamed JSONL records and resume
``summary``    records -> rates, pass@k, trajectory metrics, comparisons
``training``   training curves and the reward-hacking check
``report``     plots and the markdown report
``tracking``   MLflow logging
``runner``     :func:`evaluate`, the pipeline
=============  ==============================================================
"""

from mtrl_gym import _moved

_moved.install()
