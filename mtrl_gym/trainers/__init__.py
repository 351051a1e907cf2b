"""Training: rollout engine, samplers, GRPO trainer and adapters to other stacks.

Modules here may import torch, transformers, peft and vllm, always lazily and with a
:class:`mtrl_gym.error.DependencyNotInstalled` that names the pip extra when missing.
"""
