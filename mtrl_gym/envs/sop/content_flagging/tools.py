"""Tools of the ContentFlagging domain: report, post, author, scanner and link look-ups, the two
stateful actions (record the moderation decision, escalate it) and two distractors
(translation, trending topics).

Every tool reads the episode's world through ``ctx.state``; unknown ids raise
:class:`ToolError`. Results are JSON records shaped like a moderation console's API.
"""

from __future__ import annotations

from typing import Any, Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.content_flagging.procedure import decision_number
from mtrl_gym.envs.sop.kit import Records, lookup_tool, record_once, stable_number

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_report", "get_post", "get_author", "scan_text", "check_links",
           "apply_moderation", "escalate", "translate_text", "get_trending_topics"]

Action = Literal["dismiss", "label", "age_restrict", "remove", "remove_and_suspend"]
Category = Literal["none", "threat", "personal_data", "hate_speech", "adult", "spam"]
Severity = Literal["none", "low", "medium", "high", "critical"]
Team = Literal["legal", "privacy"]


_post = Records("posts", "no post {!r}; post ids look like 'PST-12345678'")
get_report = lookup_tool("get_report", Records("reports", "no report {!r}; report ids look like 'RPT-1234567'"),
                         "report_id", "Read a user report: the reported post, the reporter, the reason chosen by the "
                         "reporter.", 'The report id, e.g. "RPT-4829130".')
get_post = lookup_tool("get_post", _post, "post_id", "Read a post's metadata: author, audience, status, language, "
                       "link count.", "The post id from the report.")
get_author = lookup_tool("get_author", Records("users", "no user {!r}"), "user_id",
                         "Read a user's account: join date, verification, strike history.",
                         'The user id, e.g. "USR-482913".')


@tool
def scan_text(ctx: ToolContext, post_id: str) -> dict[str, Any]:
    """Run the policy scanner on a post's text: hits with category, score (0-1) and context.

    Args:
        post_id: The post id.
    """
    post = _post(ctx, post_id)
    if post["status"].strip().lower() == "deleted_by_author":
        raise ToolError(f"post {post['post_id']} was deleted by its author; its text is no longer available")
    return {"post_id": post["post_id"], "hits": ctx.state["scans"][post["post_id"]]}


@tool
def check_links(ctx: ToolContext, post_id: str) -> dict[str, Any]:
    """The links in a post with their domain reputation (clean, suspicious, malicious).

    Args:
        post_id: The post id.
    """
    post = _post(ctx, post_id)
    if post["status"].strip().lower() == "deleted_by_author":
        raise ToolError(f"post {post['post_id']} was deleted by its author; its links are no longer available")
    return {"post_id": post["post_id"], "links": ctx.state["links"][post["post_id"]]}


@tool
def apply_moderation(ctx: ToolContext, post_id: str, action: Action, category: Category, severity: Severity
                     ) -> dict[str, Any]:
    """Record the moderation decision on a reported post (one decision per post) and carry out its action.

    Args:
        post_id: The post id.
        action: The action taken.
        category: The governing policy category ("none" for no violation).
        severity: The governing severity ("none" for no violation).
    """
    post = _post(ctx, post_id)
    record = {"decision_id": decision_number(ctx.state["decision_number"]), "post_id": post["post_id"],
              "action": action, "violation_category": category, "severity": severity}
    return record_once(ctx, "decisions", record, lambda first: f"post {post['post_id']} already has decision "
                       f"{first['decision_id']}; a decision cannot be changed")


@tool
def escalate(ctx: ToolContext, decision_id: str, team: Team) -> dict[str, Any]:
    """Escalate a recorded decision to a specialist team (once per decision).

    Args:
        decision_id: The id apply_moderation returned.
        team: The team to escalate to.
    """
    made = [d for d in ctx.state["decisions"] if d["decision_id"] == decision_id.strip().upper()]
    if not made:
        raise ToolError(f"no decision {decision_id!r}; record the decision with apply_moderation first")
    record = {"decision_id": made[0]["decision_id"], "team": team, "status": "queued"}
    return record_once(ctx, "escalations", record,
                       lambda first: f"decision {decision_id.strip().upper()} is already escalated")


@tool
def translate_text(ctx: ToolContext, post_id: str, target_language: str) -> dict[str, Any]:
    """Machine-translate a post's text into another language.

    Args:
        post_id: The post id.
        target_language: A two-letter language code, e.g. "en".
    """
    post = _post(ctx, post_id)
    return {"post_id": post["post_id"], "target_language": target_language,
            "text": post["text"], "confidence": round(0.5 + stable_number(post["post_id"]) % 50 / 100, 2)}


@tool
def get_trending_topics(region: str) -> dict[str, Any]:
    """The topics trending today in a region.

    Args:
        region: A region name, e.g. "europe".
    """
    topics = ("football", "elections", "weather", "music", "cooking", "travel", "film", "science")
    n = stable_number("trend", region)
    return {"region": region, "topics": [topics[(n + k) % len(topics)] for k in range(3)]}


DISTRACTOR_TOOLS = ("translate_text", "get_trending_topics")
TOOLS = ToolSet([get_report, get_post, get_author, scan_text, check_links, apply_moderation, escalate,
                 translate_text, get_trending_topics])
