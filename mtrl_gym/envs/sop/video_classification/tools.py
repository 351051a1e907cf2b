"""Tools of the VideoClassification domain: upload, content-signal and uploader look-ups, the catalogue
assignment (the stateful action) and two distractors (view counts, a transcoding status).

Every tool reads the episode's world through ``ctx.state``; unknown ids raise :class:`ToolError`.
"""

from __future__ import annotations

from typing import Any, Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolSet, tool
from mtrl_gym.envs.sop.kit import Records, lookup_tool, record_once, stable_number
from mtrl_gym.envs.sop.video_classification.procedure import assignment_number

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_upload", "get_content_signals", "get_uploader", "assign_category",
           "get_view_stats", "get_transcode_status"]

Category = Literal["news", "education", "sports", "music", "food", "entertainment", "uncategorized"]
Audience = Literal["general", "kids", "mature"]
Monetization = Literal["full", "limited", "none"]


_upload = Records("uploads", "no upload {!r}; video ids look like 'VID-1234567'")


get_upload = lookup_tool("get_upload", _upload, "video_id",
                         "Read an uploaded video's record: uploader, duration, the category the uploader declared.",
                         'The video id, e.g. "VID-4829130".')


@tool
def get_content_signals(ctx: ToolContext, video_id: str) -> dict[str, Any]:
    """The content classifier's output for a video: detected topics with confidence, the music share.

    Args:
        video_id: The video id.
    """
    return ctx.state["signals"][_upload(ctx, video_id)["video_id"]]


get_uploader = lookup_tool("get_uploader", Records("uploaders", "no uploader {!r}"), "uploader_id",
                           "Read an uploader's channel: channel type (creator, brand, kids_channel), region.",
                           'The uploader id, e.g. "UPL-48213".')


@tool
def assign_category(ctx: ToolContext, video_id: str, category: Category, audience: Audience,
                    monetization: Monetization) -> dict[str, Any]:
    """Record a video's catalogue category, audience and monetisation (once per video).

    Args:
        video_id: The video id.
        category: The catalogue category.
        audience: The audience rating.
        monetization: The monetisation level.
    """
    upload = _upload(ctx, video_id)
    record = {"assignment_id": assignment_number(ctx.state["assignment_number"]), "video_id": upload["video_id"],
              "category": category, "audience": audience, "monetization": monetization}
    return record_once(ctx, "assignments", record,
                       lambda first: f"video {upload['video_id']} is already classified ({first['assignment_id']})")


@tool
def get_view_stats(video_id: str) -> dict[str, Any]:
    """A video's view count and average watch time.

    Args:
        video_id: The video id.
    """
    n = stable_number("views", video_id)
    return {"video_id": video_id, "views": n % 100000, "avg_watch_s": n % 300}


@tool
def get_transcode_status(video_id: str) -> dict[str, Any]:
    """Whether a video's renditions are ready.

    Args:
        video_id: The video id.
    """
    return {"video_id": video_id, "renditions": ["360p", "720p", "1080p"][: 1 + stable_number("tc", video_id) % 3],
            "status": "ready"}


DISTRACTOR_TOOLS = ("get_view_stats", "get_transcode_status")
TOOLS = ToolSet([get_upload, get_content_signals, get_uploader, assign_category, get_view_stats,
                 get_transcode_status])
