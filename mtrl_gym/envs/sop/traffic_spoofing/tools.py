"""Tools of the TrafficSpoofing domain: publisher, segment, signal and ads.txt look-ups, the case
system (the stateful action) and two distractors (campaign budgets, an exchange rate).

Every tool reads the episode's world through ``ctx.state``; unknown ids raise
:class:`ToolError` (a domain without an ads.txt file is an answer, not an error).
"""

from __future__ import annotations

from typing import Any, Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.kit import Records, lookup_tool, record_once, stable_number
from mtrl_gym.envs.sop.traffic_spoofing.procedure import case_number, norm_domain

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_publisher", "list_traffic_segments", "get_segment_signals",
           "fetch_ads_txt", "file_traffic_case", "get_campaign_budget", "convert_currency"]

CaseVerdict = Literal["clean", "suspicious", "spoofing"]
Action = Literal["none", "monitor", "hold_payout", "suspend"]


_publisher = Records("publishers", "no publisher {!r}; publisher ids look like 'PUB-123456'")


get_publisher = lookup_tool("get_publisher", _publisher, "publisher_id",
                            "Read a publisher account: seller id, tier, declared domains, payout status.",
                            'The publisher id, e.g. "PUB-482913".')


@tool
def list_traffic_segments(ctx: ToolContext, publisher_id: str) -> dict[str, Any]:
    """The publisher's traffic segments in the review period, each with its declared domain.

    Args:
        publisher_id: The publisher id.
    """
    pub = _publisher(ctx, publisher_id)
    return {"publisher_id": pub["publisher_id"], "segments": ctx.state["segments"][pub["publisher_id"]]}


get_segment_signals = lookup_tool("get_segment_signals", Records("signals", "no segment {!r}"), "segment_id",
                                  "Traffic-quality signals of a segment: referrer domain, "
                                  "data-centre and user-agent shares, impressions, clicks.",
                                  'The segment id, e.g. "SEG-482913".')


@tool
def fetch_ads_txt(ctx: ToolContext, domain: str) -> dict[str, Any]:
    """The ads.txt file of a domain: the seller ids authorised to sell its inventory.

    Args:
        domain: A domain name, e.g. "dailyharbor.example".
    """
    return ctx.state["ads_txt"].get(norm_domain(domain), {"domain": domain, "found": False})


@tool
def file_traffic_case(ctx: ToolContext, publisher_id: str, verdict: CaseVerdict, action: Action,
                      flagged_segments: list[str]) -> dict[str, Any]:
    """File a traffic-quality case against a publisher and apply its action (one case per review).

    Args:
        publisher_id: The publisher id.
        verdict: The review's verdict.
        action: The action taken.
        flagged_segments: The ids of the flagged segments.
    """
    pub = _publisher(ctx, publisher_id)
    known = {s["segment_id"] for s in ctx.state["segments"][pub["publisher_id"]]}
    unknown = sorted(set(flagged_segments) - known)
    if unknown:
        raise ToolError(f"segment(s) {unknown} are not segments of publisher {pub['publisher_id']}")
    record = {"case_id": case_number(ctx.state["case_number"]), "publisher_id": pub["publisher_id"],
              "verdict": verdict, "action": action, "flagged_segments": sorted(flagged_segments)}
    return record_once(ctx, "cases", record,
                       lambda first: f"publisher {pub['publisher_id']} already has case {first['case_id']}")


@tool
def get_campaign_budget(campaign_id: str) -> dict[str, Any]:
    """An advertiser campaign's daily budget and spend so far.

    Args:
        campaign_id: The campaign id.
    """
    n = stable_number("budget", campaign_id)
    return {"campaign_id": campaign_id, "daily_budget": 100 + n % 5000, "spent_today": n % 100}


@tool
def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict[str, Any]:
    """Convert an amount between currencies at today's rate.

    Args:
        amount: The amount.
        from_currency: The source currency, e.g. "USD".
        to_currency: The target currency, e.g. "EUR".
    """
    rate = 0.5 + stable_number("fx", from_currency, to_currency) % 100 / 100
    return {"amount": round(amount * rate, 2), "currency": to_currency, "rate": rate}


DISTRACTOR_TOOLS = ("get_campaign_budget", "convert_currency")
TOOLS = ToolSet([get_publisher, list_traffic_segments, get_segment_signals, fetch_ads_txt, file_traffic_case,
                 get_campaign_budget, convert_currency])
