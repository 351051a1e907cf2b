"""World generator of the VideoClassification domain: one uploaded video, its content signals and uploader.

Outcome first: the catalogue category is drawn (one of six, or the uploader's declared one
when no topic qualifies, or uncategorised) with the audience, then topic detections whose
qualifying confidences make that category win under SOP VC-1 (other categories get smaller
sums; graver-looking topics stay under the threshold), the music share, and the duration.
``world["plan"]`` keeps the intent for tests.

Noise levels: 0 — topics well above or below the threshold, clean names. 1 — topics at the
threshold, many sub-threshold detections of another category, topic names in other case,
a music share just under the override. 2 — more of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import ids, pick, vary_case, weighted

__all__ = ["DIFFICULTY_LIMITS", "generate_world", "DEFAULT_DIFFICULTY", "MAX_TOPICS", "CATEGORIES", "TOPICS",
           "PRECEDENCE", "AUDIENCES", "MONETIZATION", "TOPIC_MIN", "MATURE_MIN", "MUSIC_OVERRIDE", "SHORT_BELOW_S",
           "MATURE_TOPICS"]

DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "topics": 5}
#: Largest value of the ``topics`` knob (topic detections per video).
MAX_TOPICS = 10
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"topics": (1, MAX_TOPICS)}
TOPICS: dict[str, tuple[str, ...]] = {
    "news": ("news_report", "interview", "press_conference"), "education": ("mathematics", "history", "science"),
    "sports": ("football", "tennis", "cycling"), "music": ("guitar", "concert", "singing"),
    "food": ("recipe", "baking", "restaurant"), "entertainment": ("trailer", "gameplay", "comedy")}
#: Tie-break between categories with equal sums: earlier wins.
PRECEDENCE = tuple(TOPICS)
CATEGORIES = (*PRECEDENCE, "uncategorized")
AUDIENCES = ("general", "kids", "mature")
MONETIZATION = ("full", "limited", "none")
MATURE_TOPICS = ("violence", "gambling")
TOPIC_MIN = 0.40
MATURE_MIN = 0.60
MUSIC_OVERRIDE = 0.70
SHORT_BELOW_S = 60
_TARGETS = tuple((c, 0.13) for c in PRECEDENCE) + (("declared", 0.12), ("uncategorized", 0.1))


def _conf(rng: np.random.Generator, low: float, high: float) -> float:
    return round(float(rng.uniform(low, high)), 2)


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One uploaded video and every record behind it; every draw comes from ``rng``."""
    noise, room = difficulty["noise"], difficulty["topics"]
    target = weighted(rng, _TARGETS)
    declared = pick(rng, PRECEDENCE) if target == "declared" else \
        pick(rng, ("other", "misc", "vlog")) if target == "uncategorized" else pick(rng, (*PRECEDENCE, "other"))
    category = declared if target == "declared" else target
    detections: list[tuple[str, float]] = []
    music_share = _conf(rng, 0.0, 0.6)
    if category not in ("uncategorized",) and target != "declared":
        if category == "music" and rng.random() < 0.4:
            music_share = _conf(rng, MUSIC_OVERRIDE, 0.95)  # the override decides, topics need not
            declared = "other" if declared == "news" else declared  # a news fallback would block the override
        else:
            win = [_conf(rng, 0.55, 0.95) for _ in range(int(rng.integers(1, min(2, room) + 1)))]
            if noise and rng.random() < 0.2 * noise:
                win[0] = TOPIC_MIN  # the threshold itself qualifies
            detections += [(pick(rng, TOPICS[category]), c) for c in win]
            budget = sum(win) - 0.05
            other = pick(rng, [c for c in PRECEDENCE if c != category])
            if budget > TOPIC_MIN + 0.01 and rng.random() < 0.6 and len(detections) < room:
                detections.append((pick(rng, TOPICS[other]), _conf(rng, TOPIC_MIN + 0.01, min(budget, 0.95))))
            if noise and category != "music" and rng.random() < 0.3 * noise:
                music_share = _conf(rng, 0.6, MUSIC_OVERRIDE - 0.01)  # just under the override
    # Sub-threshold detections never count, however many.
    for _ in range(int(rng.integers(0, 2 + 2 * noise))):
        if len(detections) >= room:
            break
        detections.append((pick(rng, pick(rng, list(TOPICS.values()))), _conf(rng, 0.05, TOPIC_MIN - 0.02)))
    audience = pick(rng, AUDIENCES)
    kids_channel = audience == "kids"
    if audience == "mature":  # beyond the knob's count: the knob counts catalogue topics
        detections.append((pick(rng, MATURE_TOPICS), _conf(rng, MATURE_MIN, 0.95)))
    elif noise and rng.random() < 0.3 * noise:
        detections.append((pick(rng, MATURE_TOPICS), _conf(rng, 0.2, MATURE_MIN - 0.02)))  # not mature
    if category == "news" and music_share >= MUSIC_OVERRIDE:
        music_share = 0.5
    detections = [detections[int(i)] for i in rng.permutation(len(detections))] if detections else detections
    video_id, uploader_id = ids(rng, "VID-", 1, width=7)[0], ids(rng, "UPL-", 1, width=5)[0]
    duration = int(rng.integers(15, 59)) if rng.random() < 0.25 else int(rng.integers(60, 3600))
    return {"inputs": {"video_id": video_id},
            "uploads": {video_id: {"video_id": video_id, "uploader_id": uploader_id, "duration_s": duration,
                                   "declared_category": vary_case(rng, declared, noise),
                                   "title": f"Upload {video_id[-3:]}"}},
            "signals": {video_id: {"video_id": video_id, "music_share": music_share,
                                   "topics": [{"topic": vary_case(rng, t, noise), "confidence": c}
                                              for t, c in detections]}},
            "uploaders": {uploader_id: {"uploader_id": uploader_id,
                                        "channel_type": "kids_channel" if kids_channel else
                                        pick(rng, ("creator", "brand")), "region": pick(rng, ("EU", "US", "APAC"))}},
            "assignments": [], "assignment_number": int(rng.integers(10**5, 10**6)),
            "plan": {"category": category, "audience": audience}}
