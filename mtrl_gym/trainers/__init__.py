"""Training: the GRPO trainer (``mtrl_gym.trainers.grpo``) and what it needs beyond rollouts.

Modules here may import torch, transformers, peft and vllm, always lazily and with a
:class:`mtrl_gym.error.DependencyNotInstalled` that names the pip extra when missing. The
rollout engine, samplers and trajectories live in :mod:`mtrl_gym.rollout`; their old paths
under ``mtrl_gym.trainers`` still import, with a DeprecationWarning, until 0.3.
"""

from mtrl_gym import _moved

_moved.install()
