"""Every environment id of mtrl_gym, registered with gymnasium on ``import mtrl_gym``.

>>> import gymnasium, mtrl_gym
>>> env = gymnasium.make("mtrl/Wordle-v0")
>>> "mtrl/Wordle-v0" in mtrl_gym.registry.list_envs()
True

gymnasium 1.x does not load entry points, so registration happens when this module is
imported (``import mtrl_gym`` does it, and ``gymnasium.make("mtrl_gym:mtrl/Wordle-v0")``
imports the package implicitly).
"""

from __future__ import annotations

import difflib
from typing import Any

import gymnasium

from mtrl_gym.error import UnknownEnv

__all__ = ["ENV_SPECS", "MULTIAGENT_SPECS", "register_envs", "list_envs", "list_multiagent_envs", "make",
           "make_multiagent", "is_multiagent", "spec", "normalize_id", "PACKAGE_PREFIX"]

NAMESPACE = "mtrl"
#: The module prefix gymnasium accepts before an id: ``"mtrl_gym:mtrl/Wordle-v0"`` imports the package first.
PACKAGE_PREFIX = "mtrl_gym:"

#: id -> (entry point, default kwargs). One line per environment; docs live on the classes.
ENV_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "mtrl/Wordle-v0": ("mtrl_gym.envs.wordle.env:WordleEnv", {}),
    "mtrl/Wordle-Hard-v0": ("mtrl_gym.envs.wordle.env:WordleEnv", {"hard_mode": True}),
    "mtrl/Sandbox-Weather-v0": ("mtrl_gym.envs.sandbox.weather:WeatherEnv", {}),
    "mtrl/Sandbox-Orders-v0": ("mtrl_gym.envs.sandbox.orders:OrdersEnv", {}),
    "mtrl/Sandbox-Shop-v0": ("mtrl_gym.envs.sandbox.shop:ShopEnv", {}),
    "mtrl/SOP-DangerousGoods-v0": ("mtrl_gym.envs.sop.dangerous_goods:DangerousGoodsEnv", {}),
    "mtrl/SOP-ReferralAbuse-v0": ("mtrl_gym.envs.sop.referral_abuse:ReferralAbuseEnv", {}),
    "mtrl/SOP-CustomerService-v0": ("mtrl_gym.envs.sop.customer_service:CustomerServiceEnv", {}),
    "mtrl/SOP-AircraftInspection-v0": ("mtrl_gym.envs.sop.aircraft_inspection:AircraftInspectionEnv", {}),
    "mtrl/SOP-PatientIntake-v0": ("mtrl_gym.envs.sop.patient_intake:PatientIntakeEnv", {}),
    "mtrl/SOP-KYBReview-v0": ("mtrl_gym.envs.sop.kyb_review:KYBReviewEnv", {}),
    "mtrl/SOP-OrderFulfillment-v0": ("mtrl_gym.envs.sop.order_fulfillment:OrderFulfillmentEnv", {}),
    "mtrl/SOP-ContentFlagging-v0": ("mtrl_gym.envs.sop.content_flagging:ContentFlaggingEnv", {}),
    "mtrl/SOP-SellerEmailIntent-v0": ("mtrl_gym.envs.sop.seller_email_intent:SellerEmailIntentEnv", {}),
    "mtrl/SOP-PackageInspection-v0": ("mtrl_gym.envs.sop.package_inspection:PackageInspectionEnv", {}),
    "mtrl/SOP-TrafficSpoofing-v0": ("mtrl_gym.envs.sop.traffic_spoofing:TrafficSpoofingEnv", {}),
    "mtrl/SOP-VideoAnnotationQA-v0": ("mtrl_gym.envs.sop.video_annotation_qa:VideoAnnotationQAEnv", {}),
    "mtrl/SOP-VideoClassification-v0": ("mtrl_gym.envs.sop.video_classification:VideoClassificationEnv", {}),
}

#: Multi-agent (PettingZoo) id -> (module with ``env()`` and ``parallel_env()``, default kwargs).
#: Not gymnasium ids: make them with :func:`make_multiagent`.
MULTIAGENT_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "mtrl/WordleDuel-v0": ("mtrl_gym.envs.multiagent.wordle_duel", {}),
    "mtrl/SOP-CustomerCall-v0": ("mtrl_gym.envs.multiagent.customer_call", {}),
}


def normalize_id(env_id: str) -> str:
    """``env_id`` without the :data:`PACKAGE_PREFIX` (``"mtrl_gym:mtrl/Wordle-v0"`` -> ``"mtrl/Wordle-v0"``).

    Every id mtrl_gym reads goes through this one function, so ``mtrl_gym:``-prefixed ids
    (the form gymnasium uses to import a package) work wherever a bare id does.

    >>> normalize_id("mtrl_gym:mtrl/Wordle-v0"), normalize_id("CartPole-v1")
    ('mtrl/Wordle-v0', 'CartPole-v1')
    """
    return env_id.removeprefix(PACKAGE_PREFIX)


def register_envs() -> None:
    """Register every id in :data:`ENV_SPECS` with gymnasium (idempotent)."""
    for env_id, (entry_point, kwargs) in ENV_SPECS.items():
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(id=env_id, entry_point=entry_point, kwargs=dict(kwargs),
                           disable_env_checker=False)


def list_envs() -> list[str]:
    """The registered mtrl_gym environment ids, sorted."""
    return sorted(ENV_SPECS)


def list_multiagent_envs() -> list[str]:
    """The multi-agent (PettingZoo) environment ids, sorted."""
    return sorted(MULTIAGENT_SPECS)


def is_multiagent(env_id: str) -> bool:
    """Whether ``env_id`` names a multi-agent env (made with :func:`make_multiagent`)."""
    return normalize_id(env_id) in MULTIAGENT_SPECS


def _unknown(env_id: str, known: list[str] | None = None) -> UnknownEnv:
    candidates = known if known is not None else list_envs()
    close = difflib.get_close_matches(env_id, candidates, n=3, cutoff=0.5)
    if not close:  # compare names without namespace/version too: "wordle" -> mtrl/Wordle-v0
        base = env_id.split("/")[-1].split("-v")[0].lower()
        close = [e for e in candidates if base and base in e.lower()][:3]
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    if known is not None and known == list_multiagent_envs():
        return UnknownEnv(f"unknown multi-agent environment id {env_id!r}.{hint} "
                          f"mtrl_gym.registry.list_multiagent_envs() lists all {len(known)} ids.")
    if is_multiagent(env_id):
        hint += " It is a multi-agent env: make it with mtrl_gym.registry.make_multiagent()."
    return UnknownEnv(f"unknown environment id {env_id!r}.{hint} "
                      f"mtrl_gym.registry.list_envs() lists all {len(ENV_SPECS)} ids.")


def spec(env_id: str) -> gymnasium.envs.registration.EnvSpec:
    """The gymnasium spec of a registered id; unknown ids raise with close matches."""
    env_id = normalize_id(env_id)
    if env_id not in ENV_SPECS:
        raise _unknown(env_id)
    return gymnasium.spec(env_id)


def make(env_id: str, **kwargs: Any) -> gymnasium.Env:
    """``gymnasium.make`` for mtrl ids, with a helpful error for unknown ids."""
    spec(env_id)
    return gymnasium.make(normalize_id(env_id), **kwargs)


def make_multiagent(env_id: str, *, parallel: bool = False, **kwargs: Any):
    """A multi-agent env: PettingZoo's AEC API, or its Parallel API with ``parallel=True``.

    >>> duel = make_multiagent("mtrl/WordleDuel-v0", parallel=True)  # doctest: +SKIP
    >>> obs, infos = duel.reset(seed=0)                              # doctest: +SKIP

    Needs ``pip install "mtrl-gym[pettingzoo]"``; unknown ids raise with close matches.
    """
    import importlib

    bare = normalize_id(env_id)
    if bare not in MULTIAGENT_SPECS:
        raise _unknown(bare, list_multiagent_envs())
    module, defaults = MULTIAGENT_SPECS[bare]
    mod = importlib.import_module(module)
    return (mod.parallel_env if parallel else mod.env)(**{**defaults, **kwargs})


register_envs()
