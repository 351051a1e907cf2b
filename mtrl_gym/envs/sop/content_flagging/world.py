"""World generator of the ContentFlagging domain: one user report, the post, its author and the scans.

Outcome first: the governing policy category and severity are drawn (or no violation, or
a post the author already deleted), then whether its evidence is quoted, the author's
strike history, and only then the scanner hits and links that produce them under SOP
CM-12, with lesser violations of other categories and sub-threshold hits as traps. The
reference procedure computes the label from the records; ``world["plan"]`` keeps the
intent (never shown by a tool) for tests.

Noise levels: 0 — only qualifying hits, clean category names and statuses, strikes in
the window. 1 — sub-threshold hits of graver categories, hits exactly at a threshold,
overturned and expired strikes, names and statuses in other case, adult content in a
members-only group. 2 — more of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import ids, pick, vary_case, weighted

__all__ = ["DIFFICULTY_LIMITS", "generate_world", "DEFAULT_DIFFICULTY", "MAX_HITS", "CATEGORIES", "SEVERITIES",
           "ACTIONS", "ESCALATIONS", "THRESHOLDS", "BASE_SEVERITY", "PRECEDENCE", "ACTION_MATRIX", "STRIKE_WINDOW_DAYS"]

DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "hits": 4}
#: Largest value of the ``hits`` knob (scanner hits on a post, traps included).
MAX_HITS = 8
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"hits": (1, MAX_HITS)}
CATEGORIES = ("none", "threat", "personal_data", "hate_speech", "adult", "spam")
SEVERITIES = ("none", "low", "medium", "high", "critical")
ACTIONS = ("dismiss", "label", "age_restrict", "remove", "remove_and_suspend")
ESCALATIONS = ("none", "legal", "privacy")
#: Scanner score at or above which a hit counts (SOP section 4).
THRESHOLDS = {"threat": 0.80, "personal_data": 0.60, "hate_speech": 0.70, "adult": 0.75, "spam": 0.50}
#: Severity of a counted, direct hit (SOP section 5); spam links have their own rule.
BASE_SEVERITY = {"threat": "critical", "personal_data": "high", "hate_speech": "high", "adult": "medium",
                 "spam": "low"}
#: Tie-break between categories of equal severity: earlier wins.
PRECEDENCE = ("threat", "personal_data", "hate_speech", "adult", "spam")
#: severity -> action for 0, 1, and 2 or more active strikes (SOP section 7).
ACTION_MATRIX = {"none": ("dismiss", "dismiss", "dismiss"), "low": ("label", "label", "remove"),
                 "medium": ("remove", "remove", "remove_and_suspend"),
                 "high": ("remove", "remove_and_suspend", "remove_and_suspend"),
                 "critical": ("remove_and_suspend",) * 3}
STRIKE_WINDOW_DAYS = 90
#: (governing category, severity, quoted, weight): the outcomes the generator draws.
_TARGETS = (("none", "none", False, 0.14), ("threat", "critical", False, 0.09), ("threat", "high", True, 0.05),
            ("personal_data", "high", False, 0.09), ("personal_data", "medium", True, 0.05),
            ("hate_speech", "high", False, 0.09), ("hate_speech", "medium", True, 0.06),
            ("adult", "medium", False, 0.09), ("adult", "low", True, 0.05),
            ("spam", "high", False, 0.09), ("spam", "low", False, 0.12), ("deleted", "none", False, 0.08))
_START = date(2025, 1, 6)
_TOPICS = ("a local football match", "a bakery opening", "the city council vote", "a concert review",
           "a second-hand bike sale", "the weekend weather", "a recipe for lentil soup", "a lost cat")
_DOMAINS = {"clean": ("news.example.org", "shop.example.com", "wiki.example.net"),
            "suspicious": ("free-prizes.example.biz", "cheap-meds.example.info"),
            "malicious": ("login-verify.example.ru", "wallet-drain.example.top")}


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity)


def _lower(severity: str) -> str:
    return SEVERITIES[max(0, _rank(severity) - 1)]


def _hit(rng: np.random.Generator, category: str, score: float, quoted: bool, noise: int) -> dict[str, Any]:
    return {"category": vary_case(rng, category, noise), "score": round(score, 2),
            "context": "quoted" if quoted else "direct", "span": [int(rng.integers(0, 40)), int(rng.integers(41, 90))]}


def _counted(rng: np.random.Generator, category: str, noise: int) -> float:
    """A score that counts: at the threshold itself now and then at noise."""
    low = THRESHOLDS[category]
    if noise and rng.random() < 0.15 * noise:
        return low
    return float(rng.uniform(low + 0.01, 0.99))


def _below(rng: np.random.Generator, category: str) -> float:
    return float(rng.uniform(0.05, THRESHOLDS[category] - 0.01))


def _lesser(rng: np.random.Generator, severity: str, audience_public: bool, governing: str
            ) -> list[tuple[str, bool]]:
    """(category, quoted) evidence of other categories whose severity is strictly below ``severity``."""
    out = []
    for category in PRECEDENCE:
        if category in (governing, "spam"):
            continue
        base = BASE_SEVERITY[category] if (category != "adult" or audience_public) else "none"
        for quoted in (False, True):
            got = _lower(base) if quoted else base
            if got != "none" and _rank(got) < _rank(severity):
                out.append((category, quoted))
    return out


def _strikes(rng: np.random.Generator, active: int, review: date, noise: int) -> list[dict[str, Any]]:
    numbers = ids(rng, "STK-", active + 4, width=6)
    out = []
    for k in range(active):
        out.append({"strike_id": numbers[k], "issued_on": (review - timedelta(days=int(rng.integers(0, 91)))).isoformat(),
                    "status": vary_case(rng, pick(rng, ("active", "appeal_upheld")), noise)})
    if noise:
        for k in range(int(rng.integers(0, 2 * noise + 1))):
            if rng.random() < 0.5:  # overturned on appeal: never counts
                day, status = review - timedelta(days=int(rng.integers(0, 91))), "overturned"
            else:  # expired: issued before the window
                day, status = review - timedelta(days=int(rng.integers(91, 400))), "active"
            out.append({"strike_id": numbers[active + k], "issued_on": day.isoformat(),
                        "status": vary_case(rng, status, noise)})
    return [out[int(i)] for i in rng.permutation(len(out))] if out else out


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One reported post and every record behind it; every draw comes from ``rng``."""
    noise, max_hits = difficulty["noise"], difficulty["hits"]
    category, severity, quoted = weighted(rng, [((c, s, q), w) for c, s, q, w in _TARGETS])
    review = _START + timedelta(days=int(rng.integers(0, 300)))
    deleted = category == "deleted"
    if deleted:
        category = pick(rng, PRECEDENCE)  # the deleted post may have held anything: it is never scanned
    public = category != "adult" or severity != "none"
    if category == "none" and noise and rng.random() < 0.5:
        public = False  # adult content in a members-only group is no violation (rule 5.2)
    audience = "public" if public else pick(rng, ("members_only_group", "age_verified_group"))
    hits: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    if category not in ("none", "spam"):
        hits.append(_hit(rng, category, _counted(rng, category, noise), quoted, noise))
    elif category == "spam":
        if severity == "high":
            links.append({"url": f"https://{pick(rng, _DOMAINS['malicious'])}/x{int(rng.integers(100, 999))}",
                          "reputation": "malicious"})
        elif rng.random() < 0.5:
            links.append({"url": f"https://{pick(rng, _DOMAINS['suspicious'])}/p{int(rng.integers(100, 999))}",
                          "reputation": "suspicious"})
        else:
            hits.append(_hit(rng, "spam", _counted(rng, "spam", noise), False, noise))
    # Lesser evidence: strictly less severe, so the governing category stays the drawn one.
    room = max(0, max_hits - len(hits))
    if category == "none":
        if not public and rng.random() < 0.8:
            hits.append(_hit(rng, "adult", _counted(rng, "adult", noise), False, noise))
    else:
        options = _lesser(rng, severity, public, category)
        for _ in range(int(rng.integers(0, min(room, 2) + 1)) if options else 0):
            c, q = pick(rng, options)
            hits.append(_hit(rng, c, _counted(rng, c, noise), q, noise))
        if category != "spam" and _rank(severity) > _rank("low") and rng.random() < 0.4:
            links.append({"url": f"https://{pick(rng, _DOMAINS['suspicious'])}/p{int(rng.integers(100, 999))}",
                          "reputation": "suspicious"})
    # Traps: graver categories under their threshold; quoted low-severity evidence that drops to none.
    for _ in range(int(rng.integers(0, noise + 1)) if noise else 0):
        if len(hits) >= max_hits:
            break
        c = pick(rng, PRECEDENCE)
        hits.append(_hit(rng, c, _below(rng, c), bool(rng.random() < 0.3), noise))
    if noise and len(hits) < max_hits and _rank(severity) > _rank("none") and rng.random() < 0.3:
        hits.append(_hit(rng, "spam", _counted(rng, "spam", noise), True, noise))  # quoted spam: low -> none
    if rng.random() < 0.5:
        links.append({"url": f"https://{pick(rng, _DOMAINS['clean'])}/a{int(rng.integers(100, 999))}",
                      "reputation": "clean"})
    for link in links:
        link["reputation"] = vary_case(rng, link["reputation"], noise)
    hits = [hits[int(i)] for i in rng.permutation(len(hits))] if hits else hits
    active = int(rng.choice([0, 1, 2, 3], p=[0.4, 0.3, 0.2, 0.1]))
    report_id, post_id, author_id, reporter = ids(rng, "RPT-", 1, 7)[0], ids(rng, "PST-", 1, 8)[0], \
        ids(rng, "USR-", 1, 6)[0], ids(rng, "USR-", 1, 6)[0]
    post = {"post_id": post_id, "author_id": author_id, "audience": vary_case(rng, audience, noise),
            "status": vary_case(rng, "deleted_by_author" if deleted else "visible", noise),
            "created_on": (review - timedelta(days=int(rng.integers(0, 5)))).isoformat(),
            "language": pick(rng, ("en", "en", "nl", "de", "fr")),
            "text": f"Post about {pick(rng, _TOPICS)} (text withheld from this console; use the scanner)",
            "link_count": len(links)}
    author = {"user_id": author_id, "joined_on": (review - timedelta(days=int(rng.integers(30, 3000)))).isoformat(),
              "verified": bool(rng.random() < 0.1), "strikes": _strikes(rng, active, review, noise)}
    report = {"report_id": report_id, "post_id": post_id, "reporter_id": reporter,
              "reason": pick(rng, ("harassment", "spam", "hate", "privacy", "other", "nudity")),
              "received_on": review.isoformat()}
    return {"inputs": {"report_id": report_id, "review_date": review.isoformat()},
            "reports": {report_id: report}, "posts": {post_id: post}, "users": {author_id: author},
            "scans": {post_id: hits}, "links": {post_id: links}, "decisions": [], "escalations": [],
            "decision_number": int(rng.integers(100000, 1000000)),
            "plan": {"category": "none" if deleted else category, "severity": severity, "deleted": deleted,
                     "active_strikes": active}}
