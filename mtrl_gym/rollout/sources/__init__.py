"""Rollout sources: the ways a trainer's episodes are produced.

The built-in agent loop in this process (:mod:`~mtrl_gym.rollout.sources.local`), your own
agent behind a policy endpoint (:mod:`~mtrl_gym.rollout.sources.agent`), Ray actors
(:mod:`~mtrl_gym.rollout.sources.ray_workers`), multi-agent self-play
(:mod:`~mtrl_gym.rollout.sources.multiagent`) and rollouts sampled ahead of the optimiser
(:mod:`~mtrl_gym.rollout.sources.asynchronous`, a wrapper around any of them), and dynamic
sampling, more task rows while a step's groups agree (:mod:`~mtrl_gym.rollout.sources.dynamic`,
another wrapper).
"""
