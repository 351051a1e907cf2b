"""Training: the GRPO trainer (``mtrl_gym.trainers.grpo``) and what it needs beyond rollouts.

Modules here may import torch, transformers, peft and vllm, always lazily and with a
:class:`mtrl_gym.error.DependencyNotInstalled` that names the pip extra when missing. The
rollout engine, samplers and trajectories live in :mod:`mtrl_gym.rollout`. The setting
groups the GRPO and SFT configs share (``lora``, ``optimizer``, ``tracking``,
``checkpoints``) are :mod:`mtrl_gym.trainers.settings`.
"""
