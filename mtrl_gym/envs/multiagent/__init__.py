"""Multi-agent text environments on PettingZoo's AEC and Parallel APIs.

``mtrl/WordleDuel-v0`` (two seats race to one secret word) and
``mtrl/SOP-CustomerCall-v0`` (a support agent and the customer who holds the facts). Make
them with :func:`mtrl_gym.registry.make_multiagent`; the rollout layer plays them with
:mod:`mtrl_gym.rollout.sources.multiagent`. Needs ``pip install "mtrl-gym[pettingzoo]"``.
"""
