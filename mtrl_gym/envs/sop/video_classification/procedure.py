"""SOP VC-1 as code: the reference procedure over records, and the scripted oracle over tool calls.

:func:`classify` applies the SOP to the records the tools return (the upload, its content
signals, the uploader); :func:`expected` feeds it the world's records and :func:`oracle`
what it fetched through ``call``, then records the assignment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mtrl_gym.envs.sop.video_classification.world import (MATURE_MIN, MATURE_TOPICS, MUSIC_OVERRIDE, PRECEDENCE,
                                                          SHORT_BELOW_S, TOPIC_MIN, TOPICS)

__all__ = ["classify", "norm", "category_of", "expected", "oracle", "assignment_number"]

_CATEGORY_OF = {t: c for c, topics in TOPICS.items() for t in topics}


def norm(text: Any) -> str:
    """Rule 1.2: trimmed, inner spaces collapsed, case ignored."""
    return " ".join(str(text).split()).lower()


def category_of(topics: list[Mapping[str, Any]], music_share: float, declared: str) -> tuple[str, list[str]]:
    """Sections 3-4: the category and the qualifying topics (catalogue topics at or above the threshold)."""
    sums: dict[str, float] = {}
    qualifying = []
    for t in topics:
        name = norm(t["topic"])
        if name in _CATEGORY_OF and t["confidence"] >= TOPIC_MIN:
            qualifying.append(name)
            sums[_CATEGORY_OF[name]] = round(sums.get(_CATEGORY_OF[name], 0.0) + t["confidence"], 6)
    if sums:
        best = max(sums.values())
        category = next(c for c in PRECEDENCE if sums.get(c) == best)
    else:
        category = norm(declared) if norm(declared) in PRECEDENCE else "uncategorized"
    if music_share >= MUSIC_OVERRIDE and category != "news":
        category = "music"
    return category, sorted(set(qualifying))


def assignment_number(world_number: int) -> str:
    return f"CAT-{world_number}"


def classify(upload: Mapping[str, Any], signals: Mapping[str, Any], uploader: Mapping[str, Any]) -> dict[str, Any]:
    """Sections 3-6: every answer field but the assignment id."""
    category, qualifying = category_of(signals["topics"], signals["music_share"], upload["declared_category"])
    if any(norm(t["topic"]) in MATURE_TOPICS and t["confidence"] >= MATURE_MIN for t in signals["topics"]):
        audience = "mature"
    elif norm(uploader["channel_type"]) == "kids_channel":
        audience = "kids"
    else:
        audience = "general"
    if audience == "mature" or upload["duration_s"] < SHORT_BELOW_S:
        money = "none"
    elif audience == "kids" or category in ("news", "uncategorized"):
        money = "limited"
    else:
        money = "full"
    return {"category": category, "audience": audience, "monetization": money, "qualifying_topics": qualifying}


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure applied to the world's records."""
    upload = world["uploads"][world["inputs"]["video_id"]]
    result = classify(upload, world["signals"][upload["video_id"]], world["uploaders"][upload["uploader_id"]])
    return {**result, "assignment_id": assignment_number(world["assignment_number"])}


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """Follow the SOP through tool calls only, then record the assignment."""
    upload = call("get_upload", {"video_id": inputs["video_id"]})
    signals = call("get_content_signals", {"video_id": upload["video_id"]})
    uploader = call("get_uploader", {"uploader_id": upload["uploader_id"]})
    result = classify(upload, signals, uploader)
    made = call("assign_category", {"video_id": upload["video_id"], "category": result["category"],
                                    "audience": result["audience"], "monetization": result["monetization"]})
    return {**result, "assignment_id": made["assignment_id"]}
