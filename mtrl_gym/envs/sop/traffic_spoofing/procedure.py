"""SOP TS-3 as code: the reference procedure over records, and the scripted oracle over tool calls.

:func:`review` applies the SOP to the records the tools return (the publisher, its traffic
segments, each segment's signals, each declared domain's ads.txt); :func:`expected` feeds it
the world's records and :func:`oracle` what it fetched through ``call``, then files the case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mtrl_gym.envs.sop.traffic_spoofing.world import (CTR_MAX, CTR_MIN_IMPRESSIONS, DATACENTER_MIN, SPOOFING_SHARE,
                                                      UA_MISMATCH_MIN)

__all__ = ["review", "norm_domain", "indicators", "expected", "oracle", "case_number"]


def norm_domain(text: str) -> str:
    """Rule 1.2: lower case, trimmed, a leading ``www.`` removed."""
    d = str(text).strip().lower()
    return d[4:] if d.startswith("www.") else d


def indicators(segment: Mapping[str, Any], signal: Mapping[str, Any], ads_txt: Mapping[str, Any],
               seller_id: str) -> set[str]:
    """Section 4: the indicators present for one segment."""
    out = set()
    if norm_domain(signal["referrer_domain"]) != norm_domain(segment["declared_domain"]):
        out.add("domain_spoof")
    if ads_txt.get("found") and seller_id not in ads_txt.get("sellers", []):
        out.add("unauthorized_seller")
    if signal["datacenter_ip_share"] >= DATACENTER_MIN:
        out.add("datacenter")
    if signal["ua_mismatch_share"] >= UA_MISMATCH_MIN:
        out.add("ua_mismatch")
    if signal["impressions"] >= CTR_MIN_IMPRESSIONS and signal["clicks"] > CTR_MAX * signal["impressions"]:
        out.add("ctr_anomaly")
    return out


def case_number(world_number: int) -> str:
    return f"TQ-{world_number}"


def review(publisher: Mapping[str, Any], segments: list[Mapping[str, Any]],
           signal_of: Callable[[str], Mapping[str, Any]], ads_txt_of: Callable[[str], Mapping[str, Any]]
           ) -> dict[str, Any]:
    """Sections 3-7: every answer field but the case id."""
    flagged, pair, total, flagged_imps = [], False, 0, 0
    files: dict[str, Mapping[str, Any]] = {}
    for seg in segments:
        signal = signal_of(seg["segment_id"])
        domain = norm_domain(seg["declared_domain"])
        if domain not in files:
            files[domain] = ads_txt_of(domain)
        found = indicators(seg, signal, files[domain], publisher["seller_id"])
        total += signal["impressions"]
        behaviour = len(found & {"datacenter", "ua_mismatch", "ctr_anomaly"})
        if found & {"domain_spoof", "unauthorized_seller"} or behaviour >= 2:
            flagged.append(seg["segment_id"])
            flagged_imps += signal["impressions"]
            pair = pair or {"domain_spoof", "unauthorized_seller"} <= found
    share = 100 * flagged_imps // total if total else 0
    if not flagged:
        verdict, action = "clean", "none"
    elif share >= SPOOFING_SHARE or pair:
        verdict, action = "spoofing", "suspend"
    else:
        verdict = "suspicious"
        action = "monitor" if str(publisher["tier"]).strip().lower() == "premium" else "hold_payout"
    return {"verdict": verdict, "action": action, "flagged_segments": flagged, "flagged_share": share}


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure applied to the world's records."""
    pid = world["inputs"]["publisher_id"]
    result = review(world["publishers"][pid], world["segments"][pid], lambda s: world["signals"][s],
                    lambda d: world["ads_txt"].get(d, {"domain": d, "found": False}))
    return {**result, "case_id": case_number(world["case_number"])}


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """Follow the SOP through tool calls only, then file the case (every review, a clean one too)."""
    publisher = call("get_publisher", {"publisher_id": inputs["publisher_id"]})
    segments = call("list_traffic_segments", {"publisher_id": publisher["publisher_id"]})["segments"]
    result = review(publisher, segments, lambda s: call("get_segment_signals", {"segment_id": s}),
                    lambda d: call("fetch_ads_txt", {"domain": d}))
    case_id = call("file_traffic_case", {"publisher_id": publisher["publisher_id"], "verdict": result["verdict"],
                                         "action": result["action"],
                                         "flagged_segments": result["flagged_segments"]})["case_id"]
    return {**result, "case_id": case_id}
