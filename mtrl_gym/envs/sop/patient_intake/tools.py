"""The PatientIntake tools: clinic, payer and pharmacy lookups, registration, two distractors.

Every tool reads the episode's world dict (``ctx.state``, built by
:func:`~.world.generate_world` and deep-copied per episode) or the static reference tables
of :mod:`.catalog`. Results look like the JSON a real API would send; unknown ids raise
:class:`~mtrl_gym.envs.sandbox.ToolError` with a message the model can act on.
``register_patient`` and ``send_portal_message`` write to the world; nothing else does.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

from mtrl_gym.envs.sandbox import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.kit import Records, lookup_tool, record_once
from mtrl_gym.envs.sop.patient_intake.catalog import (ALLERGENS, MEDICATIONS, PATHWAY_PREFIX, PAYERS, PLAN_NAMES,
                                                      interaction, normalize_name)
from mtrl_gym.envs.sop.patient_intake.procedure import resolve_allergen, resolve_medication

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_intake_form", "verify_eligibility", "search_pharmacies",
           "check_pharmacy_network", "lookup_medication", "check_interactions", "lookup_allergen",
           "register_patient", "get_appointment_slots", "send_portal_message"]

_MAX_LIST = 30
_MED_NAMES = sorted({n for g, (brands, _, _) in MEDICATIONS.items() for n in (g, *brands)})
_ALLERGEN_NAMES = sorted({n for s, (_, _, syn) in ALLERGENS.items() for n in (s, *syn)})


def _cased(text: str, style: str) -> str:
    return text.upper() if style == "upper" else text.title() if style == "title" else text


def _suggest(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(normalize_name(name), [normalize_name(o) for o in options], n=3, cutoff=0.6)
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""


_form = Records("forms", "no intake form {!r}; intake ids look like 'INT-12345'")


get_intake_form = lookup_tool("get_intake_form", _form, "intake_id", "Read a submitted pre-visit intake form: patient, "
                              "appointment, insurance, pharmacy, medications, allergies.",
                              'The intake id, e.g. "INT-48213".')


@tool
def verify_eligibility(ctx: ToolContext, payer_id: str, member_id: str) -> dict[str, Any]:
    """Ask a payer whether a member exists and for the member's plan and coverage dates.

    Args:
        payer_id: The payer id from the intake form, e.g. "NORTHSTAR".
        member_id: The member id exactly as the payer stores it.
    """
    payer = payer_id.strip().upper()
    if payer not in PAYERS:
        raise ToolError(f"unknown payer_id {payer_id!r}; known payers: {', '.join(sorted(PAYERS))}")
    record = ctx.state["members"].get(payer, {}).get(member_id)
    if record is None:
        return {"payer_id": payer, "payer_name": PAYERS[payer][0], "member_id": member_id, "member_found": False,
                "message": "No member matches this member id."}
    return {"payer_id": payer, "payer_name": PAYERS[payer][0], "member_found": True, **record}


@tool
def search_pharmacies(ctx: ToolContext, name: str, zip_code: str = "") -> dict[str, Any]:
    """Search the pharmacy directory by name (case-insensitive, partial names match), optionally in one ZIP code.

    Args:
        name: The pharmacy name or part of it, e.g. "Oakridge Pharmacy".
        zip_code: Only pharmacies in this ZIP code (optional).
    """
    query = normalize_name(name)
    if not query:
        raise ToolError("give part of the pharmacy name to search for")
    style = ctx.state["style"]["status_case"]
    hits = [{**p, "status": _cased(p["status"], style)} for p in ctx.state["pharmacies"]
            if query in normalize_name(p["name"]) and (not zip_code.strip() or p["zip_code"] == zip_code.strip())]
    return {"query": {"name": name, "zip_code": zip_code}, "count": len(hits), "results": hits[:10]}


@tool
def check_pharmacy_network(ctx: ToolContext, pharmacy_id: str, plan_id: str) -> dict[str, Any]:
    """The network tier of a pharmacy for a plan: "preferred", "standard" or "out_of_network".

    Args:
        pharmacy_id: The directory id of the pharmacy, e.g. "PH-20417".
        plan_id: The plan id, e.g. "NSM-PPO-2".
    """
    pid, plan = pharmacy_id.strip().upper(), plan_id.strip().upper()
    if not any(p["pharmacy_id"] == pid for p in ctx.state["pharmacies"]):
        raise ToolError(f"no pharmacy {pharmacy_id!r} in the directory; find ids with search_pharmacies")
    if plan not in PLAN_NAMES:
        raise ToolError(f"unknown plan_id {plan_id!r}")
    tier = ctx.state["networks"].get(plan, {}).get(pid, "out_of_network")
    return {"pharmacy_id": pid, "plan_id": plan, "plan_name": PLAN_NAMES[plan], "network_tier": tier}


@tool
def lookup_medication(name: str) -> dict[str, Any]:
    """Reference data of a medication by brand or generic name: generic name, class, high-alert flag.

    Args:
        name: A brand or generic name, e.g. "Lipitor" or "atorvastatin".
    """
    generic = resolve_medication(name)
    if generic is None:
        raise ToolError(f"no medication named {name!r}.{_suggest(name, _MED_NAMES)}")
    brands, drug_class, high_alert = MEDICATIONS[generic]
    return {"generic_name": generic, "brand_names": list(brands), "drug_class": drug_class,
            "high_alert": high_alert}


@tool
def check_interactions(ctx: ToolContext, medications: list[str]) -> dict[str, Any]:
    """Check every pair of the given medications for interactions (names: generic or brand).

    Args:
        medications: The medication names, e.g. ["warfarin", "aspirin"].
    """
    if len(medications) > _MAX_LIST:
        raise ToolError(f"at most {_MAX_LIST} medications per check, got {len(medications)}")
    unknown = [m for m in medications if resolve_medication(m) is None]
    if unknown:
        raise ToolError(f"unknown medication(s) {unknown}; check the names with lookup_medication")
    generics = sorted({resolve_medication(m) for m in medications})
    style = ctx.state["style"]["severity_case"]
    found = [{"drugs": [a, b], "severity": _cased(s, style)} for i, a in enumerate(generics)
             for b in generics[i + 1:] if (s := interaction(a, b))]
    return {"medications": generics, "pairs_checked": len(generics) * (len(generics) - 1) // 2,
            "interactions": found}


@tool
def lookup_allergen(substance: str) -> dict[str, Any]:
    """Reference data of an allergen: canonical name, category (drug, food, environmental), drug class.

    Args:
        substance: The allergen as written, e.g. "penicillin" or "shellfish".
    """
    canonical = resolve_allergen(substance)
    if canonical is None:
        raise ToolError(f"no allergen named {substance!r}.{_suggest(substance, _ALLERGEN_NAMES)}")
    category, drug_class, synonyms = ALLERGENS[canonical]
    return {"substance": canonical, "category": category, "drug_class": drug_class, "synonyms": list(synonyms)}


@tool
def register_patient(ctx: ToolContext, intake_id: str,
                     insurance_status: Literal["verified", "inactive", "not_found", "self_pay"],
                     pharmacy_status: Literal["in_network", "out_of_network", "invalid", "not_provided"],
                     medication_risk: Literal["low", "moderate", "high"],
                     allergy_risk: Literal["none", "low", "high"],
                     care_pathway: Literal["standard", "pharmacist_review", "clinical_review"]) -> dict[str, Any]:
    """Register the patient of an intake with the intake results; returns the registration id. Only once per intake.

    Args:
        intake_id: The intake id.
        insurance_status: Result of the insurance verification.
        pharmacy_status: Result of the pharmacy check.
        medication_risk: Medication risk level.
        allergy_risk: Allergy risk level.
        care_pathway: The assigned care pathway (decides the registration queue).
    """
    form = _form(ctx, intake_id)
    # the world holds one intake form, so a registration on file is this intake's
    rid = f"{PATHWAY_PREFIX[care_pathway]}-{ctx.state['next_registration']}"
    record_once(ctx, "registrations", {"registration_id": rid, "intake_id": form["intake_id"],
                                       "insurance_status": insurance_status, "pharmacy_status": pharmacy_status,
                                       "medication_risk": medication_risk, "allergy_risk": allergy_risk,
                                       "care_pathway": care_pathway},
                lambda first: f"intake {form['intake_id']} is already registered as {first['registration_id']}; "
                              "a registration cannot be repeated or changed")
    ctx.state["next_registration"] += 1
    return {"registration_id": rid, "intake_id": form["intake_id"], "care_pathway": care_pathway,
            "status": "registered"}


@tool
def get_appointment_slots(ctx: ToolContext, department: str, date: str = "") -> dict[str, Any]:
    """Open appointment slots of a department, optionally on one date (YYYY-MM-DD).

    Args:
        department: e.g. "Cardiology".
        date: Only slots on this date (optional).
    """
    slots = [s for s in ctx.state["slots"] if normalize_name(s["department"]) == normalize_name(department)
             and (not date.strip() or s["date"] == date.strip())]
    return {"department": department, "slots": slots}


@tool
def send_portal_message(ctx: ToolContext, intake_id: str, message: str) -> dict[str, Any]:
    """Send a message to the patient's portal inbox.

    Args:
        intake_id: The intake id of the patient.
        message: The message text (at most 2000 characters).
    """
    form = _form(ctx, intake_id)
    if not message.strip() or len(message) > 2000:
        raise ToolError("a portal message must have 1 to 2000 characters")
    msg_id = f"MSG-{len(ctx.state['messages']) + 1:04d}"
    ctx.state["messages"].append({"message_id": msg_id, "intake_id": form["intake_id"], "text": message})
    return {"message_id": msg_id, "status": "sent"}


TOOLS = ToolSet([get_intake_form, verify_eligibility, search_pharmacies, check_pharmacy_network, lookup_medication,
                 check_interactions, lookup_allergen, register_patient, get_appointment_slots, send_portal_message])
#: Tools the SOP never needs.
DISTRACTOR_TOOLS = ("get_appointment_slots", "send_portal_message")
