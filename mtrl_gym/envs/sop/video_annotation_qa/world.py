"""World generator of the VideoAnnotationQA domain: one submitted annotation, its video and a gold review.

Outcome first: the verdict is drawn (accept, rework, reject) with the annotator's level,
then how many segments carry an error and of which kind (a time outside the video, a label
outside the project's label set, an overlap with the segment before, a label the gold
reviewer changed), and whether coverage is too low; only then the segments, built in time
order so each planned error is the one SOP VA-2 finds. ``world["plan"]`` keeps the intent.

Noise levels: 0 — labels as the label set spells them, a gold review for every job.
1 — labels in other case and spacing, jobs without a gold review, segments that touch
(end = next start, no overlap). 2 — more of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import ids, pick, vary_case, weighted

__all__ = ["DIFFICULTY_LIMITS", "generate_world", "DEFAULT_DIFFICULTY", "MAX_SEGMENTS", "VERDICTS", "ERROR_KINDS",
           "COVERAGE_MIN", "REJECT_AT"]

DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "segments": 5}
#: Largest value of the ``segments`` knob.
MAX_SEGMENTS = 10
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"segments": (3, MAX_SEGMENTS)}
VERDICTS = ("accept", "rework", "reject")
ERROR_KINDS = ("invalid_time", "invalid_label", "overlap", "label_mismatch")
COVERAGE_MIN = 0.5
#: Errors at which a job is rejected, by annotator level (SOP section 6).
REJECT_AT = {"certified": 3, "trainee": 2}
_LABEL_SETS = (("person", "vehicle", "animal", "sign"), ("goal", "foul", "corner", "substitution", "replay"),
               ("cooking", "plating", "tasting", "cleaning"))
_WEIGHTS = (("accept", 0.3), ("rework", 0.35), ("reject", 0.35))


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One annotation job at QA and every record behind it; every draw comes from ``rng``."""
    noise = difficulty["noise"]
    verdict = weighted(rng, _WEIGHTS)
    level = pick(rng, ("certified", "trainee"))
    n = int(rng.integers(3, difficulty["segments"] + 1))
    labels = pick(rng, _LABEL_SETS)
    gold_found = not (noise and rng.random() < 0.2 * noise)
    kinds = [k for k in ERROR_KINDS[1:] if k != "label_mismatch" or gold_found]
    low = False
    if verdict == "accept":
        errors = 0
    elif verdict == "rework":
        errors = int(rng.integers(1, REJECT_AT[level]))
        low = bool(rng.random() < 0.25)
        errors -= low
    else:
        errors = int(rng.integers(REJECT_AT[level], REJECT_AT[level] + 2)) if rng.random() < 0.6 else 0
    by_time = verdict == "reject" and errors == 0  # a time error rejects on its own
    errors = min(errors, n - 1)
    if verdict == "reject" and not by_time and errors + low < REJECT_AT[level]:
        low = True
    if verdict == "reject" and not by_time and errors + low < REJECT_AT[level]:
        by_time = True
    plan: list[str | None] = [None] * n
    slots = [int(i) for i in rng.permutation(np.arange(1, n))][:errors]  # never the first: overlaps need a predecessor
    for i in slots:
        plan[i] = pick(rng, kinds)
    if by_time:  # never just before an overlap (its start would then lie past the video's end)
        free = [i for i in range(n) if plan[i] is None and (i == n - 1 or plan[i + 1] != "overlap")] or [n - 1]
        plan[pick(rng, free)] = "invalid_time"
    duration = float(round(rng.uniform(60, 600), 1))
    share = float(rng.uniform(0.15, 0.4)) if low else float(rng.uniform(0.65, 0.95))
    length = float(np.floor(duration * share / n * 10) / 10)  # rounded down: the last segment ends in the video
    gap = float(np.floor(duration * (1 - share) / n * 10) / 10)
    seg_ids = ids(rng, "SEG-", n, width=5)
    segments, t = [], round(float(rng.uniform(0, gap)), 1)
    for i in range(n):
        start, end = t, round(t + length, 1)
        label = pick(rng, labels)
        if plan[i] == "overlap":
            start = round(segments[-1]["end_s"] - min(1.0, length / 2), 1)
            end = round(start + length, 1)
        elif plan[i] == "invalid_time":
            end = start if rng.random() < 0.5 else round(duration + float(rng.uniform(1, 30)), 1)
        text = label if plan[i] != "invalid_label" else pick(rng, ("unknown", "misc", "other"))
        segments.append({"segment_id": seg_ids[i], "start_s": start, "end_s": end,
                         "label": vary_case(rng, text, noise)})
        touch = noise and rng.random() < 0.2 * noise
        t = max(t, end if end <= duration else t + length) + (0.0 if touch else gap)
        t = round(t, 1)
    gold = {"found": gold_found, "segments": []}
    if gold_found:
        for i, seg in enumerate(segments):
            if plan[i] == "label_mismatch":
                want = pick(rng, [x for x in labels if x != seg["label"].strip().lower()])
                gold["segments"].append({"segment_id": seg["segment_id"], "label": want})
            elif plan[i] is None and rng.random() < 0.5:
                gold["segments"].append({"segment_id": seg["segment_id"], "label": seg["label"].strip().lower()})
    job_id, video_id, annotator_id = f"JOB-{int(rng.integers(10**5, 10**6))}", f"VID-{int(rng.integers(10**5, 10**6))}", \
        f"ANN-{int(rng.integers(1000, 10000))}"
    return {"inputs": {"job_id": job_id},
            "jobs": {job_id: {"job_id": job_id, "video_id": video_id, "annotator_id": annotator_id,
                              "submitted_at": "2025-06-02T10:00:00Z", "segments": segments}},
            "videos": {video_id: {"video_id": video_id, "duration_s": duration, "label_set": list(labels),
                                  "fps": pick(rng, (24, 25, 30))}},
            "annotators": {annotator_id: {"annotator_id": annotator_id, "level": level, "joined": "2024-02-01"}},
            "gold": {job_id: gold}, "qa_results": [], "qa_number": int(rng.integers(10**5, 10**6)),
            "plan": {"verdict": verdict}}
