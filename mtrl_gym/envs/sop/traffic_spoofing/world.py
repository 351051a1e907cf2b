"""World generator of the TrafficSpoofing domain: one publisher's ad traffic and the signals behind it.

Outcome first: the verdict is drawn (clean, suspicious, spoofing) with the publisher's
tier, then which traffic segments are flagged and why (a spoofed referrer, a seller missing
from the domain's ads.txt, or two behavioural indicators), then impression counts that put
the flagged share on the drawn side of the 20 % line, and only then the raw signals. The
reference procedure computes the label; ``world["plan"]`` keeps the intent for tests.

Noise levels: 0 — clean domains, ads.txt files for every domain, no lone indicators.
1 — referrers with ``www.`` and other case, a missing ads.txt file, one behavioural
indicator alone (not enough to flag), high click rates on fewer than 1,000 impressions,
shares at a threshold. 2 — more of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import ids, pick, weighted

__all__ = ["DIFFICULTY_LIMITS", "generate_world", "DEFAULT_DIFFICULTY", "MAX_SEGMENTS", "VERDICTS", "ACTIONS",
           "DATACENTER_MIN", "UA_MISMATCH_MIN", "CTR_MAX", "CTR_MIN_IMPRESSIONS", "SPOOFING_SHARE"]

DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "segments": 4}
#: Largest value of the ``segments`` knob (traffic segments of a publisher).
MAX_SEGMENTS = 8
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"segments": (2, MAX_SEGMENTS)}
VERDICTS = ("clean", "suspicious", "spoofing")
ACTIONS = ("none", "monitor", "hold_payout", "suspend")
DATACENTER_MIN = 0.30
UA_MISMATCH_MIN = 0.20
CTR_MAX = 0.05
CTR_MIN_IMPRESSIONS = 1000
SPOOFING_SHARE = 20
_WEIGHTS = (("clean", 0.3), ("suspicious", 0.35), ("spoofing", 0.35))
_SITES = ("dailyharbor.example", "quietkitchen.example", "trailmaps.example", "pixelgarden.example",
          "northwindnews.example", "citybikes.example", "tinyrecipes.example", "stargazer.example")
_SPOOFS = ("luxurywatches.example", "premiumfinance.example", "bigbrandnews.example")
_BEHAVIOURS = ("datacenter", "ua_mismatch", "ctr")


def _signals(rng: np.random.Generator, behaviours: set[str], impressions: int, noise: int) -> dict[str, Any]:
    def share(on: bool, low: float) -> float:
        if on:
            return low if noise and rng.random() < 0.15 * noise else round(float(rng.uniform(low + 0.02, 0.9)), 2)
        return round(float(rng.uniform(0.0, low - 0.03)), 2)
    ctr = float(rng.uniform(0.06, 0.2)) if "ctr" in behaviours else float(rng.uniform(0.001, 0.04))
    return {"datacenter_ip_share": share("datacenter" in behaviours, DATACENTER_MIN),
            "ua_mismatch_share": share("ua_mismatch" in behaviours, UA_MISMATCH_MIN),
            "impressions": impressions, "clicks": int(impressions * ctr)}


def _impressions(rng: np.random.Generator, flagged: list[bool], verdict: str, spoof_pair: bool) -> list[int]:
    """Impressions per segment with the flagged share (floored percent) on the verdict's side of 20 %."""
    for _ in range(200):
        imps = [int(rng.integers(1000, 60000)) for _ in flagged]
        flagged_imps = sum(i for i, f in zip(imps, flagged) if f)
        share = 100 * flagged_imps // sum(imps)
        if verdict != "suspicious" or share < SPOOFING_SHARE - 1:
            if verdict != "spoofing" or spoof_pair or share >= SPOOFING_SHARE + 1:
                return imps
    raise RuntimeError("no impression split found")  # pragma: no cover - 200 tries always suffice


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One publisher under review and every record behind it; every draw comes from ``rng``."""
    noise = difficulty["noise"]
    verdict = weighted(rng, _WEIGHTS)
    n = int(rng.integers(2, difficulty["segments"] + 1))
    premium = bool(rng.random() < 0.4)
    seller_id = f"pub-{int(rng.integers(10**6, 10**7))}"
    domains = [str(d) for d in rng.choice(_SITES, size=min(n, len(_SITES)), replace=False)]
    seg_ids = ids(rng, "SEG-", n, width=6)
    flags = [False] * n
    spoof_pair = False
    if verdict != "clean":
        k = 1 if verdict == "suspicious" or rng.random() < 0.5 else int(rng.integers(1, n))
        for i in rng.choice(n, size=k, replace=False):
            flags[int(i)] = True
        spoof_pair = verdict == "spoofing" and rng.random() < 0.3
    segments, signals, ads_txt = [], {}, {}
    pair_done = False
    imps = _impressions(rng, flags, verdict, spoof_pair)
    for i, sid in enumerate(seg_ids):
        domain = domains[i % len(domains)]
        reasons: set[str] = set()
        if flags[i]:
            if spoof_pair and not pair_done:
                reasons, pair_done = {"spoof", "unauthorized"}, True
            elif verdict == "suspicious":
                reasons = set(pick(rng, [("spoof",), ("unauthorized",), ("datacenter", "ua_mismatch"),
                                         ("datacenter", "ctr"), ("ua_mismatch", "ctr")]))
            else:
                reasons = set(pick(rng, [("spoof",), ("unauthorized",), ("datacenter", "ua_mismatch"),
                                         ("ua_mismatch", "ctr")]))
        elif noise and rng.random() < 0.3 * noise:
            reasons = {pick(rng, _BEHAVIOURS)}  # one indicator alone: not flagged
        impressions = imps[i]
        if not flags[i] and verdict != "suspicious" and noise and rng.random() < 0.15 * noise:
            impressions, reasons = int(rng.integers(100, 999)), reasons | {"ctr"}  # too few impressions to count
        referrer = pick(rng, _SPOOFS) if "spoof" in reasons else domain
        if noise and rng.random() < 0.3 * noise:
            referrer = pick(rng, (f"www.{referrer}", referrer.upper(), f" {referrer}"))
        segments.append({"segment_id": sid, "declared_domain": domain})
        signals[sid] = {"segment_id": sid, "referrer_domain": referrer,
                        **_signals(rng, reasons & set(_BEHAVIOURS), impressions, noise)}
        if "unauthorized" in reasons:
            ads_txt[domain] = {"domain": domain, "found": True, "sellers": [f"pub-{int(rng.integers(10**6, 10**7))}"]}
    for domain in domains:
        if domain not in ads_txt:
            if noise and rng.random() < 0.2 * noise:
                ads_txt[domain] = {"domain": domain, "found": False}  # no file: not an indicator
            else:
                ads_txt[domain] = {"domain": domain, "found": True,
                                   "sellers": sorted([seller_id, f"pub-{int(rng.integers(10**6, 10**7))}"])}
    publisher_id = f"PUB-{int(rng.integers(10**5, 10**6))}"
    publisher = {"publisher_id": publisher_id, "seller_id": seller_id, "tier": "premium" if premium else "standard",
                 "domains": domains, "payout_status": "active"}
    return {"inputs": {"publisher_id": publisher_id, "review_date": "2025-06-30"},
            "publishers": {publisher_id: publisher}, "segments": {publisher_id: segments}, "signals": signals,
            "ads_txt": ads_txt, "cases": [], "case_number": int(rng.integers(10**5, 10**6)),
            "plan": {"verdict": verdict}}
