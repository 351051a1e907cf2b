"""The PatientIntake SOP as code: its decision rules, the reference procedure and the oracle.

The rules (:func:`coverage_status`, :func:`medication_risk`, :func:`allergy_risk`,
:func:`care_pathway`, ...) are small pure functions of plain values, one per SOP step.
:func:`expected` applies them to a generated world directly (the label, correct by
construction); :func:`oracle` applies the same rules to what the tools return, calling
them exactly as the SOP says, so an oracle that scores 100% proves the tools expose
everything the label depends on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mtrl_gym.envs.sop.patient_intake.catalog import (
    ALLERGENS, DISCOUNT_PLAN, MEDICATIONS, MILD_REACTIONS, PATHWAY_PREFIX, interaction, normalize_name)

__all__ = ["normalize_member_id", "is_blank", "coverage_status", "tier_status", "resolve_medication",
           "resolve_allergen", "medication_risk", "reaction_is_severe", "allergy_risk", "care_pathway",
           "registration_id", "expected", "oracle"]

_MILD = frozenset(normalize_name(r) for r in MILD_REACTIONS)
_BY_NAME = {normalize_name(n): g for g, (brands, _, _) in MEDICATIONS.items() for n in (g, *brands)}
_ALLERGEN_BY_NAME = {normalize_name(n): s for s, (_, _, syn) in ALLERGENS.items() for n in (s, *syn)}


def normalize_member_id(member_id: str) -> str:
    """Step 2.2: spaces and hyphens removed, letters upper-cased.

    >>> normalize_member_id(" nsm-4821 0937")
    'NSM48210937'
    """
    return "".join(c for c in str(member_id) if c not in " -\t").upper()


def is_blank(value: Any) -> bool:
    """Missing, null, or a string of only whitespace (the SOP's "missing or blank")."""
    return value is None or (isinstance(value, str) and not value.strip())


def coverage_status(start: str, end: str | None, appointment: str) -> str:
    """Step 2.5: ``verified`` when the coverage dates include the appointment date, else ``inactive``.

    >>> coverage_status("2024-01-01", None, "2025-03-10"), coverage_status("2024-01-01", "2025-03-09", "2025-03-10")
    ('verified', 'inactive')
    """
    day = dt.date.fromisoformat(appointment)
    active = dt.date.fromisoformat(start) <= day and (end is None or day <= dt.date.fromisoformat(end))
    return "verified" if active else "inactive"


def tier_status(tier: str) -> str:
    """Step 3.5: a network tier as a ``pharmacy_status``."""
    return "in_network" if tier in ("preferred", "standard") else "out_of_network"


def resolve_medication(name: str) -> str | None:
    """The generic name of a brand or generic medication name (any case), or None if unknown."""
    return _BY_NAME.get(normalize_name(name))


def resolve_allergen(substance: str) -> str | None:
    """The canonical substance of an allergen name or synonym (any case), or None if unknown."""
    return _ALLERGEN_BY_NAME.get(normalize_name(substance))


def medication_risk(generics: Iterable[str], high_alert: Iterable[str], severities: Iterable[str]) -> str:
    """Step 4.3 from the distinct generic names, the high-alert ones, and the interaction severities.

    >>> medication_risk(["metformin", "lisinopril"], [], ["minor"])
    'low'
    >>> medication_risk(["a", "b", "c", "d", "e"], [], []), medication_risk(["warfarin"], ["warfarin"], [])
    ('moderate', 'high')
    """
    generics, severities = set(generics), {normalize_name(s) for s in severities}
    if any(True for _ in high_alert) or severities & {"major", "contraindicated"}:
        return "high"
    if "moderate" in severities or len(generics) >= 5:
        return "moderate"
    return "low"


def reaction_is_severe(reaction: Any) -> bool:
    """Step 5.3: only the listed mild reactions are mild; anything else, blank or missing, is severe."""
    return is_blank(reaction) or normalize_name(reaction) not in _MILD


def allergy_risk(reactions: list[Any], allergen_classes: Iterable[str | None],
                 medication_classes: Iterable[str]) -> str:
    """Step 5: ``none`` without allergies, ``high`` on a severe reaction or a class conflict, else ``low``.

    >>> allergy_risk([], [], []), allergy_risk(["rash"], ["penicillin"], ["statin"])
    ('none', 'low')
    >>> allergy_risk(["Rash"], ["Penicillin"], ["penicillin"]), allergy_risk([None], [None], [])
    ('high', 'high')
    """
    if not reactions:
        return "none"
    meds = {normalize_name(c) for c in medication_classes}
    conflict = any(c is not None and normalize_name(c) in meds for c in allergen_classes)
    return "high" if conflict or any(reaction_is_severe(r) for r in reactions) else "low"


def care_pathway(med_risk: str, allergy: str) -> str:
    """Step 6: the care pathway from the two risk levels."""
    if med_risk == "high" or allergy == "high":
        return "clinical_review"
    return "pharmacist_review" if med_risk == "moderate" else "standard"


def registration_id(world: Mapping[str, Any], pathway: str) -> str:
    """The id ``register_patient`` issues for the next registration in ``world`` on ``pathway``."""
    return f"{PATHWAY_PREFIX[pathway]}-{world['next_registration']}"


# ------------------------------------------------------------------ reference procedure


def _insurance(world: Mapping[str, Any], form: Mapping[str, Any]) -> tuple[str, str | None]:
    ins = form.get("insurance")
    if not isinstance(ins, Mapping) or is_blank(ins.get("payer_id")) or is_blank(ins.get("member_id")):
        return "self_pay", None
    member = world["members"].get(ins["payer_id"].strip().upper(), {}).get(normalize_member_id(ins["member_id"]))
    if member is None:
        return "not_found", None
    status = coverage_status(member["coverage_start"], member.get("coverage_end"), form["appointment_date"])
    return status, (member["plan_id"] if status == "verified" else None)


def _pharmacy(world: Mapping[str, Any], form: Mapping[str, Any], plan_id: str | None) -> str:
    pref = form.get("preferred_pharmacy")
    if not isinstance(pref, Mapping) or is_blank(pref.get("name")):
        return "not_provided"
    matches = [p for p in world["pharmacies"] if normalize_name(p["name"]) == normalize_name(pref["name"])
               and p["zip_code"] == str(pref.get("zip_code", "")).strip()]
    if not matches or normalize_name(matches[0]["status"]) != "open":
        return "invalid"
    tier = world["networks"].get(plan_id or DISCOUNT_PLAN, {}).get(matches[0]["pharmacy_id"], "out_of_network")
    return tier_status(tier)


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The label of ``world``: the SOP applied to the generated records directly."""
    form = world["forms"][world["intake_id"]]
    insurance, plan_id = _insurance(world, form)
    generics = sorted({resolve_medication(m["name"]) for m in form["medications"]})
    high_alert = sorted(g for g in generics if MEDICATIONS[g][2])
    severities = [s for i, a in enumerate(generics) for b in generics[i + 1:] if (s := interaction(a, b))]
    med = medication_risk(generics, high_alert, severities)
    allergies = form["allergies"]
    allergy = allergy_risk([a.get("reaction") for a in allergies],
                           [ALLERGENS[resolve_allergen(a["substance"])][1] for a in allergies],
                           [MEDICATIONS[g][1] for g in generics])
    pathway = care_pathway(med, allergy)
    return {"registration_id": registration_id(world, pathway), "insurance_status": insurance,
            "pharmacy_status": _pharmacy(world, form, plan_id), "medication_risk": med,
            "allergy_risk": allergy, "flagged_medications": high_alert, "care_pathway": pathway}


# ------------------------------------------------------------------------------ oracle

Call = Callable[[str, dict[str, Any]], Any]


def _oracle_insurance(call: Call, form: Mapping[str, Any]) -> tuple[str, str | None]:
    ins = form.get("insurance")
    if not isinstance(ins, Mapping) or is_blank(ins.get("payer_id")) or is_blank(ins.get("member_id")):
        return "self_pay", None
    reply = call("verify_eligibility", {"payer_id": ins["payer_id"],
                                        "member_id": normalize_member_id(ins["member_id"])})
    if not reply["member_found"]:
        return "not_found", None
    status = coverage_status(reply["coverage_start"], reply.get("coverage_end"), form["appointment_date"])
    return status, (reply["plan_id"] if status == "verified" else None)


def _oracle_pharmacy(call: Call, form: Mapping[str, Any], plan_id: str | None) -> str:
    pref = form.get("preferred_pharmacy")
    if not isinstance(pref, Mapping) or is_blank(pref.get("name")):
        return "not_provided"
    zip_code = str(pref.get("zip_code", "")).strip()
    found = call("search_pharmacies", {"name": pref["name"], "zip_code": zip_code})
    match = [p for p in found["results"]
             if normalize_name(p["name"]) == normalize_name(pref["name"]) and p["zip_code"] == zip_code]
    if not match or normalize_name(match[0]["status"]) != "open":
        return "invalid"
    reply = call("check_pharmacy_network", {"pharmacy_id": match[0]["pharmacy_id"],
                                            "plan_id": plan_id or DISCOUNT_PLAN})
    return tier_status(reply["network_tier"])


def oracle(inputs: Mapping[str, Any], call: Call) -> dict[str, Any]:
    """Follow the SOP through tool calls only: ``call(tool_name, arguments)`` returns the decoded result."""
    intake_id = inputs["intake_id"]
    form = call("get_intake_form", {"intake_id": intake_id})
    insurance, plan_id = _oracle_insurance(call, form)
    pharmacy = _oracle_pharmacy(call, form, plan_id)
    meds: dict[str, dict[str, Any]] = {}
    for entry in form["medications"]:
        info = call("lookup_medication", {"name": entry["name"]})
        meds[info["generic_name"]] = info
    generics = sorted(meds)
    severities = []
    if len(generics) >= 2:
        severities = [i["severity"] for i in call("check_interactions", {"medications": generics})["interactions"]]
    high_alert = [g for g in generics if meds[g]["high_alert"]]
    med = medication_risk(generics, high_alert, severities)
    reactions, classes = [], []
    for entry in form["allergies"]:
        reactions.append(entry.get("reaction"))
        classes.append(call("lookup_allergen", {"substance": entry["substance"]})["drug_class"])
    allergy = allergy_risk(reactions, classes, [m["drug_class"] for m in meds.values()])
    pathway = care_pathway(med, allergy)
    reply = call("register_patient", {"intake_id": intake_id, "insurance_status": insurance,
                                      "pharmacy_status": pharmacy, "medication_risk": med,
                                      "allergy_risk": allergy, "care_pathway": pathway})
    return {"registration_id": reply["registration_id"], "insurance_status": insurance,
            "pharmacy_status": pharmacy, "medication_risk": med, "allergy_risk": allergy,
            "flagged_medications": high_alert, "care_pathway": pathway}
