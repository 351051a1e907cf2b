"""Text-action Gymnasium environments (one sub-package per family) and the profile hook.

Every env family describes itself through :class:`~mtrl_gym.envs.profile.EnvProfile`
(:func:`profile_of`): its task splits, reference policies, success threshold and shaping
limits. Code outside ``envs`` asks the profile instead of naming a family.
"""

from mtrl_gym.envs.profile import EnvProfile, TextPolicy, profile_of

__all__ = ["EnvProfile", "TextPolicy", "profile_of"]
