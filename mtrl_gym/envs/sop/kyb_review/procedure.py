"""The KYBReview SOP as code: its decision rules, the reference procedure and the oracle.

Each rule of SOP FC-210 is a small pure function (:func:`registration_check`,
:func:`total_stakes`, :func:`classify_hit`, :func:`bank_check`, :func:`decide`, ...).
:func:`expected` applies them to a generated world directly (the label, correct by
construction); :func:`oracle` applies the same rules to what the tools return, calling
them as the SOP says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mtrl_gym.envs.sop.kyb_review.catalog import (
    ACTIVE_STATUSES, BUSINESS_ACCOUNT_TYPES, DECISION_PREFIX, MATCH_THRESHOLD, SCREEN_MIN_SCORE, business_key,
    match_score, person_key, score_bound)

__all__ = ["registry_key", "registration_check", "total_stakes", "beneficial_owners", "ownership_check",
           "bank_check", "classify_hit", "sanctions_result", "decide", "case_id", "screen", "expected", "oracle"]

Person = Mapping[str, Any]  # {"person_id", "name", "date_of_birth"}


def registry_key(registration_number: str, jurisdiction: str) -> str:
    """How the registry files a business: ``"DE:4829103"``."""
    return f"{str(jurisdiction).strip().upper()}:{str(registration_number).strip()}"


def _lower(text: Any) -> str:
    return " ".join(str(text).split()).casefold()


def registration_check(record: Mapping[str, Any] | None, legal_name: str) -> str:
    """Step 2.2 from the registry reply (None or ``found`` false: not found) and the declared name."""
    if record is None or not record.get("found", True):
        return "not_found"
    if _lower(record["status"]) not in ACTIVE_STATUSES:
        return "inactive"
    return "verified" if business_key(record["legal_name"]) == business_key(legal_name) else "name_mismatch"


def total_stakes(owners: Sequence[Mapping[str, Any]], entity_owners: Mapping[str, Sequence[Mapping[str, Any]]]
                 ) -> dict[str, int]:
    """Step 3.3: each individual's total stake in basis points (1% = 100), direct plus indirect.

    ``entity_owners`` maps :func:`registry_key` of each entity owner to its filing's owners.
    Integer arithmetic keeps the 25% threshold exact (50% of 50% is exactly 2500).

    >>> total_stakes([{"owner_type": "individual", "person_id": "P-1", "percent": 10},
    ...               {"owner_type": "entity", "registration_number": "7", "jurisdiction": "DE", "percent": 60}],
    ...              {"DE:7": [{"owner_type": "individual", "person_id": "P-1", "percent": 25}]})
    {'P-1': 2500}
    """
    out: dict[str, int] = {}
    for owner in owners:
        if _lower(owner["owner_type"]) == "individual":
            out[owner["person_id"]] = out.get(owner["person_id"], 0) + 100 * int(owner["percent"])
            continue
        for sub in entity_owners[registry_key(owner["registration_number"], owner["jurisdiction"])]:
            out[sub["person_id"]] = out.get(sub["person_id"], 0) + int(owner["percent"]) * int(sub["percent"])
    return out


def beneficial_owners(stakes: Mapping[str, int], control_person_id: str) -> list[str]:
    """Step 3.4: the 25% owners (stake >= 2500 bp) plus the control person, each once, sorted."""
    return sorted({p for p, bp in stakes.items() if bp >= 2500} | {control_person_id})


def ownership_check(stakes: Mapping[str, int], declared_ids: Iterable[str]) -> str:
    """Step 3.4: ``undisclosed_owner`` when a 25% owner is not among the declared owners."""
    declared = set(declared_ids)
    return "undisclosed_owner" if any(bp >= 2500 and p not in declared for p, bp in stakes.items()) else "consistent"


def bank_check(account: Mapping[str, Any] | None, reference_name: str) -> str:
    """Step 4.3 from the bank's reply (None or ``found`` false: invalid)."""
    if account is None or not account.get("found", True) or _lower(account["status"]) != "open":
        return "invalid"
    if _lower(account["account_type"]) not in BUSINESS_ACCOUNT_TYPES or \
            business_key(account["account_holder"]) != business_key(reference_name):
        return "holder_mismatch"
    return "verified"


def classify_hit(hit: Mapping[str, Any], person: Person) -> str:
    """Step 5.2: ``ignore``, ``confirmed`` or ``potential`` for one watch-list hit of ``person``."""
    if hit["match_score"] < MATCH_THRESHOLD:
        return "ignore"
    dob = hit.get("date_of_birth")
    if dob not in (None, "") and dob != person["date_of_birth"]:
        return "ignore"
    if dob == person["date_of_birth"] and person_key(hit["name"]) == person_key(person["name"]):
        return "confirmed"
    return "potential"


def sanctions_result(classes: Iterable[str]) -> str:
    """Step 5.3: the worst classification over every hit of every beneficial owner."""
    classes = set(classes)
    return "confirmed_match" if "confirmed" in classes else "potential_match" if "potential" in classes else "clear"


def decide(registration: str, ownership: str, sanctions: str, bank: str) -> str:
    """Step 6: the decision matrix."""
    if sanctions != "clear" or registration == "not_found":
        return "escalate"
    if registration != "verified" or ownership != "consistent" or bank != "verified":
        return "request_information"
    return "approve"


def case_id(world: Mapping[str, Any], decision: str) -> str:
    """The id ``open_case`` issues for the next case in ``world`` with ``decision``."""
    return f"KYB-{DECISION_PREFIX[decision]}-{world['next_case']}"


def screen(watchlist: Sequence[Mapping[str, Any]], name: str) -> list[dict[str, Any]]:
    """What ``screen_sanctions(name)`` returns: entries scoring >= 70, best first."""
    hits = [{**e, "match_score": match_score(name, e["name"])} for e in watchlist
            if score_bound(name, e["name"]) >= SCREEN_MIN_SCORE - 0.5]
    hits = [h for h in hits if h["match_score"] >= SCREEN_MIN_SCORE]
    return sorted(hits, key=lambda h: (-h["match_score"], h["entry_id"]))


# ------------------------------------------------------------------ reference procedure


def _people_of(owners: Sequence[Mapping[str, Any]], entity_owners: Mapping[str, Sequence[Mapping[str, Any]]],
               control: Person) -> dict[str, Person]:
    people: dict[str, Person] = {}
    for o in [*owners, *(s for subs in entity_owners.values() for s in subs), control]:
        if "person_id" in o:
            people.setdefault(o["person_id"], o)
    return people


def _ownership(filing: Mapping[str, Any] | None, app: Mapping[str, Any],
               entity_owners: Mapping[str, Sequence[Mapping[str, Any]]]):
    """``(ownership_check, beneficial owner ids, {person_id: person})`` from Step 3."""
    if filing is None:
        stakes = {o["person_id"]: 100 * int(o["ownership_percent"]) for o in app["owners"]}
        people = _people_of(app["owners"], {}, app["control_person"])
        return "no_filing", beneficial_owners(stakes, app["control_person"]["person_id"]), people
    stakes = total_stakes(filing["owners"], entity_owners)
    people = _people_of(filing["owners"], entity_owners, filing["control_person"])
    check = ownership_check(stakes, [o["person_id"] for o in app["owners"]])
    return check, beneficial_owners(stakes, filing["control_person"]["person_id"]), people


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The label of ``world``: the SOP applied to the generated records directly."""
    app = world["applications"][world["application_id"]]
    biz = app["business"]
    key = registry_key(biz["registration_number"], biz["jurisdiction"])
    record = world["registry"].get(key)
    registration = registration_check(record, biz["legal_name"])
    filing = world["filings"].get(key) if record is not None else None
    entity_owners = {} if filing is None else {
        registry_key(o["registration_number"], o["jurisdiction"]):
            world["filings"][registry_key(o["registration_number"], o["jurisdiction"])]["owners"]
        for o in filing["owners"] if _lower(o["owner_type"]) == "entity"}
    ownership, owners, people = _ownership(filing, app, entity_owners)
    classes = [classify_hit(h, people[p]) for p in owners for h in screen(world["watchlist"], people[p]["name"])]
    sanctions = sanctions_result(classes)
    account = world["banks"].get(app["bank_account"]["routing_number"], {}).get(app["bank_account"]["account_number"])
    bank = bank_check(account, record["legal_name"] if record is not None else biz["legal_name"])
    decision = decide(registration, ownership, sanctions, bank)
    return {"case_id": case_id(world, decision), "decision": decision, "registration_check": registration,
            "ownership_check": ownership, "beneficial_owners": owners, "sanctions_result": sanctions,
            "bank_check": bank}


# ------------------------------------------------------------------------------ oracle

Call = Callable[[str, dict[str, Any]], Any]


def oracle(inputs: Mapping[str, Any], call: Call) -> dict[str, Any]:
    """Follow the SOP through tool calls only: ``call(tool_name, arguments)`` returns the decoded result."""
    app_id = inputs["application_id"]
    app = call("get_application", {"application_id": app_id})
    biz = app["business"]
    where = {"registration_number": biz["registration_number"], "jurisdiction": biz["jurisdiction"]}
    record = call("lookup_registry", where)
    registration = registration_check(record, biz["legal_name"])
    filing = None
    if registration != "not_found":
        filing = call("get_ownership_filing", where)
        filing = filing if filing["found"] else None
    entity_owners = {}
    for owner in (filing or {}).get("owners", []):
        if _lower(owner["owner_type"]) == "entity":
            sub = call("get_ownership_filing", {"registration_number": owner["registration_number"],
                                                "jurisdiction": owner["jurisdiction"]})
            entity_owners[registry_key(owner["registration_number"], owner["jurisdiction"])] = sub["owners"]
    ownership, owners, people = _ownership(filing, app, entity_owners)
    account = call("verify_bank_account", {"routing_number": app["bank_account"]["routing_number"],
                                           "account_number": app["bank_account"]["account_number"]})
    bank = bank_check(account, record["legal_name"] if registration != "not_found" else biz["legal_name"])
    classes = []
    for pid in owners:
        reply = call("screen_sanctions", {"name": people[pid]["name"]})
        classes += [classify_hit(h, people[pid]) for h in reply["hits"]]
    sanctions = sanctions_result(classes)
    decision = decide(registration, ownership, sanctions, bank)
    case = call("open_case", {"application_id": app_id, "decision": decision})
    return {"case_id": case["case_id"], "decision": decision, "registration_check": registration,
            "ownership_check": ownership, "beneficial_owners": owners, "sanctions_result": sanctions,
            "bank_check": bank}
