"""The KYBReview tools: application, registry, filings, watch list, bank, case filing, two distractors.

Every tool reads the episode's world dict (``ctx.state``, built by
:func:`~.world.generate_world` and deep-copied per episode). External registries answer
``{"found": false}`` for records they do not hold, like a real search API; the bank's own
systems raise :class:`~mtrl_gym.envs.sandbox.ToolError` for unknown application ids.
``open_case`` is the only tool that writes to the world.
"""

from __future__ import annotations

from typing import Any, Literal

from mtrl_gym.envs.sandbox import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.kit import Records, lookup_tool, record_once
from mtrl_gym.envs.sop.kyb_review.catalog import BANKS, DECISION_PREFIX, business_key, person_key
from mtrl_gym.envs.sop.kyb_review.procedure import registry_key, screen

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_application", "lookup_registry", "get_ownership_filing",
           "screen_sanctions", "verify_bank_account", "open_case", "get_credit_report", "search_adverse_media"]

_MAX_NAME = 200


_application = Records("applications", "no application {!r}; application ids look like 'APP-123456'")


get_application = lookup_tool("get_application", _application, "application_id",
                              "Read a business onboarding application: business details, "
                              "declared owners, control person, bank account.",
                              'The application id, e.g. "APP-482913".')


@tool
def lookup_registry(ctx: ToolContext, registration_number: str, jurisdiction: str) -> dict[str, Any]:
    """Look a business up in the official business registry of a jurisdiction.

    Args:
        registration_number: The registration (file) number, e.g. "4829103".
        jurisdiction: Two-letter code of the registering state, e.g. "DE".
    """
    record = ctx.state["registry"].get(registry_key(registration_number, jurisdiction))
    if record is None:
        return {"found": False, "registration_number": registration_number, "jurisdiction": jurisdiction,
                "message": "No business is registered under this number in this jurisdiction."}
    return {"found": True, **record}


@tool
def get_ownership_filing(ctx: ToolContext, registration_number: str, jurisdiction: str) -> dict[str, Any]:
    """The latest beneficial-ownership filing of a registered business: owners with percentages, control person.

    Args:
        registration_number: The business's registration number.
        jurisdiction: Two-letter code of the registering state.
    """
    filing = ctx.state["filings"].get(registry_key(registration_number, jurisdiction))
    if filing is None:
        return {"found": False, "registration_number": registration_number, "jurisdiction": jurisdiction,
                "message": "No ownership filing is on record for this business."}
    return {"found": True, "registration_number": registration_number.strip(),
            "jurisdiction": jurisdiction.strip().upper(), **filing}


@tool
def screen_sanctions(ctx: ToolContext, name: str) -> dict[str, Any]:
    """Screen a person's name against the sanctions watch lists; returns hits with a match score (0-100).

    Args:
        name: The person's full name, e.g. "Anna Novak".
    """
    if not person_key(name) or len(name) > _MAX_NAME:
        raise ToolError(f"give a person's name of 1 to {_MAX_NAME} characters to screen")
    hits = screen(ctx.state["watchlist"], name)
    return {"query": name, "lists_searched": 3, "hit_count": len(hits), "hits": hits}


@tool
def verify_bank_account(ctx: ToolContext, routing_number: str, account_number: str) -> dict[str, Any]:
    """Verify a bank account with the account-validation network: holder, type and status.

    Args:
        routing_number: The nine-digit routing number.
        account_number: The account number.
    """
    routing = routing_number.strip()
    account = ctx.state["banks"].get(routing, {}).get(account_number.strip())
    if account is None:
        reason = "no such account at this bank" if routing in BANKS else "unknown routing number"
        return {"found": False, "routing_number": routing_number, "account_number": account_number,
                "message": reason}
    return {"found": True, **account}


@tool
def open_case(ctx: ToolContext, application_id: str,
              decision: Literal["approve", "escalate", "request_information"], note: str = "") -> dict[str, Any]:
    """File the review decision of an application as a case; returns the case id. One case per application.

    Args:
        application_id: The application id.
        decision: The review decision.
        note: Optional free-text note for the case (at most 2000 characters).
    """
    app = _application(ctx, application_id)
    if len(note) > 2000:
        raise ToolError("the note may have at most 2000 characters")
    # the world holds one application, so a case on file is this application's
    cid = f"KYB-{DECISION_PREFIX[decision]}-{ctx.state['next_case']}"
    record_once(ctx, "cases", {"case_id": cid, "application_id": app["application_id"], "decision": decision,
                               "note": note},
                lambda first: f"application {app['application_id']} already has case {first['case_id']}; a case "
                              "cannot be filed twice or changed")
    ctx.state["next_case"] += 1
    return {"case_id": cid, "application_id": app["application_id"], "decision": decision, "status": "open"}


@tool
def get_credit_report(ctx: ToolContext, registration_number: str, jurisdiction: str) -> dict[str, Any]:
    """The commercial credit report of a registered business.

    Args:
        registration_number: The business's registration number.
        jurisdiction: Two-letter code of the registering state.
    """
    report = ctx.state["credit"].get(registry_key(registration_number, jurisdiction))
    if report is None:
        return {"found": False, "message": "No credit file for this business."}
    return {"found": True, **report}


@tool
def search_adverse_media(ctx: ToolContext, query: str) -> dict[str, Any]:
    """Search news archives for articles about a person or business.

    Args:
        query: A person or business name.
    """
    if not query.strip() or len(query) > _MAX_NAME:
        raise ToolError(f"give a name of 1 to {_MAX_NAME} characters to search for")
    keys = {person_key(query), business_key(query)}
    found = [{"headline": a["headline"].format(a["subject"]), "source": a["source"], "published": a["published"]}
             for a in ctx.state["media"] if person_key(a["subject"]) in keys or business_key(a["subject"]) in keys]
    return {"query": query, "articles": found}


TOOLS = ToolSet([get_application, lookup_registry, get_ownership_filing, screen_sanctions, verify_bank_account,
                 open_case, get_credit_report, search_adverse_media])
#: Tools the SOP never needs.
DISTRACTOR_TOOLS = ("get_credit_report", "search_adverse_media")
