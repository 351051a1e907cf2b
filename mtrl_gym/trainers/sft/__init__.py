"""Supervised fine-tuning on demonstrations (the warm start before GRPO).

:class:`~mtrl_gym.trainers.sft.config.SFTConfig` (settings),
:mod:`~mtrl_gym.trainers.sft.data` (demonstration files -> train sequences, the epoch order),
:mod:`~mtrl_gym.trainers.sft.loss` (token cross-entropy over assistant tokens) and
:class:`~mtrl_gym.trainers.sft.trainer.SFTTrainer` (the loop). Imported lazily: this package
needs torch.
"""
