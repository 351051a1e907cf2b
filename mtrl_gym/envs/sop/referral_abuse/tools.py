"""Tools of the ReferralAbuse domain: account, referral and activity look-ups, the case system
(the stateful action), and two distractors (marketing preferences, credit score).

Every tool reads the episode's world through ``ctx.state``; unknown ids raise
:class:`ToolError`. Results are JSON records shaped like a bank's internal APIs.
"""

from __future__ import annotations

from typing import Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.kit import Records, lookup_tool, record_once, stable_number

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_account", "list_referrals", "get_activity", "open_abuse_case",
           "get_marketing_preferences", "get_credit_score"]

#: The severities a case can carry (SOP section 7: never ``none``).
CaseSeverity = Literal["low", "medium", "high"]
#: The actions of the SOP's action matrix.
Action = Literal["no_action", "monitor", "warn", "claw_back", "suspend"]


_account = Records("accounts", "no account {!r}")


get_account = lookup_tool("get_account", _account, "account_id",
                          "Look up a customer account: profile, address, devices, payment methods, prior warnings.",
                          'The account id, e.g. "AC-482913".')


@tool
def list_referrals(ctx: ToolContext, account_id: str) -> dict:
    """List every referral an account has made (any status, any date), with the bonus of each.

    Args:
        account_id: The referrer's account id.
    """
    account = _account(ctx, account_id)
    return {"account_id": account["account_id"],
            "referrals": ctx.state["referrals"].get(account["account_id"], [])}


@tool
def get_activity(ctx: ToolContext, account_id: str) -> dict:
    """Get an account's activity summary (transactions in its first 30 days, balance band).

    Args:
        account_id: The account id.
    """
    account = _account(ctx, account_id)
    record = ctx.state["activity"].get(account["account_id"])
    if record is None or record.get("unavailable"):
        raise ToolError(f"no activity record exists for account {account['account_id']} (data unavailable)")
    return record


@tool
def open_abuse_case(ctx: ToolContext, account_id: str, severity: CaseSeverity, action: Action,
                    flagged_referral_ids: list[str], clawback_amount: int) -> dict:
    """Open a referral-abuse case for a referrer (one case per account).

    Args:
        account_id: The referrer's account id.
        severity: The severity of the abuse.
        action: The action decided.
        flagged_referral_ids: The ids of the flagged referrals.
        clawback_amount: The amount to claw back (0 if none).
    """
    account = _account(ctx, account_id)
    known = {r["referral_id"] for r in ctx.state["referrals"].get(account["account_id"], [])}
    unknown = sorted(set(flagged_referral_ids) - known)
    if unknown:
        raise ToolError(f"referral(s) {unknown} are not referrals of account {account['account_id']}")
    if clawback_amount < 0:
        raise ToolError(f"clawback_amount must be >= 0, got {clawback_amount}")
    case = {"case_id": ctx.state["case_id"], "account_id": account["account_id"], "severity": severity,
            "action": action, "flagged_referral_ids": list(flagged_referral_ids), "clawback_amount": clawback_amount,
            "status": "open"}
    return record_once(ctx, "cases", case, lambda first: f"account {account['account_id']} already has an open case "
                       f"({first['case_id']}); a case cannot be changed")


@tool
def get_marketing_preferences(ctx: ToolContext, account_id: str) -> dict:
    """Get an account's marketing consent and channel preferences.

    Args:
        account_id: The account id.
    """
    account = _account(ctx, account_id)
    n = stable_number(account["account_id"])
    return {"account_id": account["account_id"], "email_opt_in": bool(n % 2), "sms_opt_in": bool(n // 2 % 2),
            "preferred_channel": ("email", "sms", "app", "post")[n % 4]}


@tool
def get_credit_score(ctx: ToolContext, account_id: str) -> dict:
    """Get an account's latest credit-bureau score.

    Args:
        account_id: The account id.
    """
    account = _account(ctx, account_id)
    return {"account_id": account["account_id"], "score": 300 + stable_number("score", account["account_id"]) % 551,
            "bureau": "Equilex"}


DISTRACTOR_TOOLS = ("get_marketing_preferences", "get_credit_score")
TOOLS = ToolSet([get_account, list_referrals, get_activity, open_abuse_case, get_marketing_preferences,
                 get_credit_score])
