"""The KYBReview world generator: one onboarding application and the records the tools read.

:func:`generate_world` is a pure function of a numpy ``Generator`` and the difficulty. It
draws the outcome of each check first (the decision is approve 30%, escalate 40%, request
information 30%; within a decision the checks that may vary are mixed), builds a registry
record, ownership filings (with entity owners one level deep), watch-list entries, a bank
account and distractor data that produce those outcomes, then re-derives the label with
:func:`~.procedure.expected` and redraws in the rare case an accidental watch-list
similarity changed it. The label itself is never stored in the world.

Difficulty knobs (:data:`DEFAULT_DIFFICULTY`):

* ``noise`` (0, 1, 2): 0 canonical spellings; 1 adds business names spelt differently but
  equal under SOP 3.1 (case, ``&``/``and``, punctuation, legal-form words), mixed-case
  statuses and names, a same-number business in another jurisdiction, watch-list
  decoys (namesakes with other birth dates, weak matches), look-alike bank accounts,
  drifted declared percentages; 2 also adds hits with no date of birth and more decoys.
* ``distractors`` (bool): whether the credit and media tools are offered.
* ``max_owners`` (1-8): the most direct owners in a filing (more stakes, more screening).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import pick, weighted
from mtrl_gym.envs.sop.kyb_review.catalog import (ACTIVE_STATUSES, BANKS, BUSINESS_ACCOUNT_TYPES, INACTIVE_STATUSES,
                                                  JURISDICTIONS, LAST_NAMES, LEGAL_FORMS, NAME_STEMS, NAME_TRADES,
                                                  PERSONAL_ACCOUNT_TYPES, TITLES, WATCH_LISTS, business_key)
from mtrl_gym.envs.sop.kyb_review.people import Cast, person_variant
from mtrl_gym.envs.sop.kyb_review.procedure import expected, registry_key

__all__ = ["DIFFICULTY_LIMITS", "DEFAULT_DIFFICULTY", "draw_outcomes", "generate_world"]

DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "max_owners": 4}
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"max_owners": (1, 8)}
_CHECKS = ("registration_check", "ownership_check", "sanctions_result", "bank_check", "decision")
_FORM_TYPES = {"LLC": "limited liability company", "Inc": "corporation", "Corp": "corporation",
               "Ltd": "limited company", "Co": "general partnership"}
_TODAY = dt.date(2025, 6, 2)


def draw_outcomes(rng: np.random.Generator) -> dict[str, str]:
    """The result of each check and the decision for one task (what the records will produce)."""
    r = rng.random()
    if r < 0.3:
        return {"decision": "approve", "registration_check": "verified", "ownership_check": "consistent",
                "sanctions_result": "clear", "bank_check": "verified"}
    bank_mix = (("verified", 0.3), ("holder_mismatch", 0.35), ("invalid", 0.35))
    if r < 0.7:
        if rng.random() < 0.2:
            sanctions = weighted(rng, (("clear", 0.5), ("potential_match", 0.25), ("confirmed_match", 0.25)))
            return {"decision": "escalate", "registration_check": "not_found", "ownership_check": "no_filing",
                    "sanctions_result": sanctions, "bank_check": weighted(rng, bank_mix)}
        return {"decision": "escalate", "sanctions_result": pick(rng, ("potential_match", "confirmed_match")),
                "registration_check": weighted(rng, (("verified", 0.3), ("inactive", 0.35),
                                                      ("name_mismatch", 0.35))),
                "ownership_check": weighted(rng, (("consistent", 0.3), ("undisclosed_owner", 0.35),
                                                   ("no_filing", 0.35))),
                "bank_check": weighted(rng, bank_mix)}
    while True:
        issues = rng.random(3) < 0.5
        if issues.any():
            break
    return {"decision": "request_information", "sanctions_result": "clear",
            "registration_check": pick(rng, ("inactive", "name_mismatch")) if issues[0] else "verified",
            "ownership_check": pick(rng, ("undisclosed_owner", "no_filing")) if issues[1] else "consistent",
            "bank_check": pick(rng, ("holder_mismatch", "invalid")) if issues[2] else "verified"}


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh KYBReview world (JSON-ready) drawn with ``rng``; see the module docstring."""
    d = difficulty
    outcome = draw_outcomes(rng)
    for _ in range(100):
        world = _build(rng, d, outcome)
        label = expected(world)
        if all(label[k] == outcome[k] for k in _CHECKS):
            return world
    raise RuntimeError(f"could not build a KYBReview world for {outcome}")  # pragma: no cover


# ------------------------------------------------------------------------ business names


def _cased(rng: np.random.Generator, text: str, noise: int) -> str:
    if noise == 0:
        return text
    r = rng.random()
    text = text.upper() if r < 0.25 else text.lower() if r < 0.35 else text
    return "  ".join(text.split(" ")) if rng.random() < 0.2 else text


def _spell_business(rng: np.random.Generator, stem: str, trade: str, form: str, noise: int) -> str:
    """``stem trade form`` as someone might write it; equal to the canonical name under SOP 3.1."""
    if noise == 0:
        return f"{stem} {trade} {form}"
    if "&" in stem and rng.random() < 0.5:
        stem = stem.replace("&", "and")
    text = f"{stem} {trade}{',' if rng.random() < 0.3 else ''} {pick(rng, LEGAL_FORMS[form])}"
    return _cased(rng, text, noise)


def _other_business(rng: np.random.Generator, stem: str, trade: str, form: str) -> str:
    """A business name that differs from ``stem trade form`` under SOP 3.1 but looks related."""
    canonical = business_key(f"{stem} {trade} {form}")
    while True:
        r = rng.random()
        if r < 0.35:
            name = f"{stem} {trade} {pick(rng, [f for f in LEGAL_FORMS if f != form])}"
        elif r < 0.7:
            name = f"{stem} {trade} {pick(rng, ('Group', 'International', 'Partners', 'Services'))} {form}"
        else:
            name = f"{stem} {pick(rng, NAME_TRADES)} {form}"
        if business_key(name) != canonical:
            return name


# --------------------------------------------------------------------------- the build


def _build(rng: np.random.Generator, d: Mapping[str, Any], outcome: Mapping[str, str]) -> dict[str, Any]:
    noise = d["noise"]
    cast = Cast(rng)
    stem, trade, form = pick(rng, NAME_STEMS), pick(rng, NAME_TRADES), pick(rng, tuple(LEGAL_FORMS))
    jurisdiction = pick(rng, JURISDICTIONS)
    number = str(int(rng.integers(1_000_000, 10_000_000)))
    key = registry_key(number, jurisdiction)
    app_id = f"APP-{int(rng.integers(100_000, 1_000_000))}"
    world: dict[str, Any] = {"application_id": app_id, "applications": {}, "registry": {}, "filings": {},
                             "watchlist": [], "banks": {}, "credit": {}, "media": [], "cases": [],
                             "next_case": int(rng.integers(10_000, 100_000))}
    registered = _registry(rng, world, outcome["registration_check"], key, number, jurisdiction,
                           (stem, trade, form), noise)
    need_owner = outcome["ownership_check"] == "undisclosed_owner"
    structure = _ownership_structure(rng, cast, d["max_owners"], need_owner=need_owner)
    declared = _declared_owners(rng, structure, outcome["ownership_check"], noise)
    control = structure["control"]
    if outcome["ownership_check"] != "no_filing":
        _file(rng, world, key, registered or f"{stem} {trade} {form}", structure, noise)
        screened = {p: structure["people"][p] for p in structure["beneficial"]}
    else:
        owners = {o["person_id"]: o for o in declared}
        ids = sorted({o["person_id"] for o in declared if o["ownership_percent"] >= 25} | {control["person_id"]})
        screened = {p: owners.get(p, control) for p in ids}
    _watchlist(rng, world, cast, screened, outcome["sanctions_result"], noise)
    reference = registered if registered is not None else f"{stem} {trade} {form}"
    bank_account = _bank(rng, world, outcome["bank_check"], reference, (stem, trade, form), control, noise)
    app_name = _spell_business(rng, stem, trade, form, noise)
    world["applications"][app_id] = {
        "application_id": app_id, "submitted_on": (_TODAY - dt.timedelta(days=int(rng.integers(0, 30)))).isoformat(),
        "business": {"legal_name": app_name, "registration_number": number, "jurisdiction": jurisdiction,
                     "entity_type": _FORM_TYPES[form], "industry": trade.lower(),
                     "website": f"https://www.{stem.split()[0].lower()}{trade.lower()}.example"},
        "owners": declared, "control_person": {k: control[k] for k in ("person_id", "name", "date_of_birth", "title")},
        "bank_account": bank_account}
    _distractor_data(rng, world, key, reference, screened)
    return world


def _registry(rng, world, target: str, key: str, number: str, jurisdiction: str, name: tuple[str, str, str],
              noise: int) -> str | None:
    """Add the registry record for ``target``; return the registered legal name (None: not found)."""
    stem, trade, form = name
    if noise >= 1 and (target == "not_found" or rng.random() < 0.3):  # same number, another jurisdiction
        other = pick(rng, [j for j in JURISDICTIONS if j != jurisdiction])
        world["registry"][registry_key(number, other)] = _record(rng, number, other, _other_business(
            rng, stem, trade, form), pick(rng, ACTIVE_STATUSES), form, noise)
    if target == "not_found":
        return None
    legal = _other_business(rng, stem, trade, form) if target == "name_mismatch" or \
        (target == "inactive" and rng.random() < 0.3) else _spell_business(rng, stem, trade, form, noise)
    status = pick(rng, INACTIVE_STATUSES if target == "inactive" else ACTIVE_STATUSES)
    world["registry"][key] = _record(rng, number, jurisdiction, legal, status, form, noise)
    return legal


def _record(rng, number: str, jurisdiction: str, legal: str, status: str, form: str, noise: int) -> dict[str, Any]:
    return {"registration_number": number, "jurisdiction": jurisdiction, "legal_name": legal,
            "entity_type": _FORM_TYPES[form], "status": _cased(rng, status, noise) if noise else status,
            "formation_date": (dt.date(1995, 1, 1) + dt.timedelta(days=int(rng.integers(0, 10_000)))).isoformat(),
            "registered_agent": f"{pick(rng, LAST_NAMES)} Registered Agents"}


def _split(rng: np.random.Generator, n: int) -> list[int]:
    """``n`` positive integer percentages summing to 100."""
    cuts = sorted(int(c) for c in rng.choice(np.arange(1, 100), size=n - 1, replace=False)) if n > 1 else []
    return [b - a for a, b in zip([0, *cuts], [*cuts, 100])]


def _ownership_structure(rng: np.random.Generator, cast: Cast, max_owners: int, *, need_owner: bool):
    """Direct owners (individuals and entities), the entities' owners, stakes and beneficial owners."""
    for _ in range(200):
        n = int(rng.integers(1, max_owners + 1))
        owners, entities, stakes = [], [], {}
        for i, pct in enumerate(_split(rng, n)):
            if i > 0 and max_owners >= 3 and rng.random() < 0.3:
                subs = [{"owner_type": "individual", **cast.person(), "percent": p}
                        for p in _split(rng, int(rng.integers(1, 4)))]
                entity = {"owner_type": "entity", "name": cast.business(), "registration_number":
                          str(int(rng.integers(1_000_000, 10_000_000))), "jurisdiction": pick(rng, JURISDICTIONS),
                          "percent": pct}
                owners.append(entity)
                entities.append((entity, subs))
                for s in subs:
                    stakes[s["person_id"]] = stakes.get(s["person_id"], 0) + pct * s["percent"]
            else:
                owners.append({"owner_type": "individual", **cast.person(), "percent": pct})
                stakes[owners[-1]["person_id"]] = 100 * pct
        if entities and rng.random() < 0.3:  # someone owns both directly and through an entity
            direct = [o for o in owners if o["owner_type"] == "individual"]
            if direct:
                _, subs = entities[0]
                twin = pick(rng, direct)
                subs[0].update({k: twin[k] for k in ("person_id", "name", "date_of_birth")})
                stakes = _stakes(owners, entities)
        big = sorted(p for p, bp in stakes.items() if bp >= 2500)
        if need_owner and not big:
            continue
        people = {o["person_id"]: o for o in owners if o["owner_type"] == "individual"}
        people.update({s["person_id"]: s for _, subs in entities for s in subs})
        control = {**people[pick(rng, big)]} if big and rng.random() < 0.5 else cast.person()
        control = {k: control[k] for k in ("person_id", "name", "date_of_birth")} | {"title": pick(rng, TITLES)}
        people.setdefault(control["person_id"], control)
        return {"owners": owners, "entities": entities, "stakes": stakes, "people": people, "control": control,
                "beneficial": sorted(set(big) | {control["person_id"]})}
    raise RuntimeError("could not draw an ownership structure")  # pragma: no cover


def _stakes(owners, entities) -> dict[str, int]:
    out: dict[str, int] = {}
    for o in owners:
        if o["owner_type"] == "individual":
            out[o["person_id"]] = out.get(o["person_id"], 0) + 100 * o["percent"]
    for entity, subs in entities:
        for s in subs:
            out[s["person_id"]] = out.get(s["person_id"], 0) + entity["percent"] * s["percent"]
    return out


def _declared_owners(rng, structure, target: str, noise: int) -> list[dict[str, Any]]:
    """The owners the application declares: every 25% owner and the direct individuals, with their stakes."""
    stakes = structure["stakes"]
    ids = sorted({p for p, bp in stakes.items() if bp >= 2500} |
                 {o["person_id"] for o in structure["owners"] if o["owner_type"] == "individual"})
    if target == "undisclosed_owner":
        big = [p for p in ids if stakes[p] >= 2500]
        indirect = [p for p in big if not any(o.get("person_id") == p for o in structure["owners"])]
        ids.remove(pick(rng, indirect or big))
    out = []
    for p in ids:
        person = structure["people"][p]
        pct = max(1, (stakes[p] + 50) // 100)
        if noise >= 1 and rng.random() < 0.2 and target != "no_filing":
            pct = max(1, pct + int(rng.integers(-3, 4)))
        out.append({"person_id": p, "name": person["name"], "date_of_birth": person["date_of_birth"],
                    "ownership_percent": int(pct)})
    return [out[int(i)] for i in rng.permutation(len(out))]


def _file(rng, world, key: str, entity_name: str, structure, noise: int) -> None:
    """The ownership filings: the business's and one per entity owner."""
    def person(o: Mapping[str, Any]) -> dict[str, Any]:
        return {**o, "name": _cased(rng, o["name"], noise)}

    filed_on = (_TODAY - dt.timedelta(days=int(rng.integers(30, 900)))).isoformat()
    world["filings"][key] = {"entity_name": entity_name, "filed_on": filed_on,
                             "owners": [person(o) if o["owner_type"] == "individual" else dict(o)
                                        for o in structure["owners"]],
                             "control_person": dict(structure["control"])}
    for entity, subs in structure["entities"]:
        sub_key = registry_key(entity["registration_number"], entity["jurisdiction"])
        world["filings"][sub_key] = {"entity_name": entity["name"], "filed_on": filed_on,
                                     "owners": [person(s) for s in subs],
                                     "control_person": {k: subs[0][k] for k in ("person_id", "name", "date_of_birth")}
                                     | {"title": "Managing Member"}}


def _watchlist(rng, world, cast: Cast, screened: Mapping[str, Mapping[str, Any]], target: str, noise: int) -> None:
    """Watch-list entries: the target hit on one screened person, decoys, and unrelated entries."""
    entries = [{"name": cast.name(), "date_of_birth": cast.dob()} for _ in range(int(rng.integers(4, 9)))]
    ids = sorted(screened)
    if target != "clear":
        who = screened[pick(rng, ids)]
        if target == "confirmed_match":
            entries.append({"name": _cased(rng, who["name"], noise), "date_of_birth": who["date_of_birth"]})
        else:
            kind = pick(rng, ("spelling", "no_dob", "both") if noise >= 1 else ("spelling",))
            name = who["name"] if kind == "no_dob" else person_variant(rng, who["name"], (85, 99))
            entries.append({"name": _cased(rng, name, noise),
                            "date_of_birth": None if kind != "spelling" else who["date_of_birth"]})
    if noise >= 1:
        for pid in ids:
            who, r = screened[pid], rng.random()
            if r < 0.3:  # a namesake: same name, another birth date
                entries.append({"name": _cased(rng, who["name"], noise), "date_of_birth": cast.dob()})
            elif r < 0.5 + 0.2 * (noise - 1):
                weak = person_variant(rng, who["name"], (70, 84))
                if weak:
                    entries.append({"name": weak, "date_of_birth": who["date_of_birth"] if rng.random() < 0.5
                                    else None if noise >= 2 else cast.dob()})
    order = rng.permutation(len(entries))
    ids_out = 10_000 + rng.choice(90_000, size=len(entries), replace=False)
    for slot, i in enumerate(order):
        e = entries[int(i)]
        entry = {"entry_id": f"WL-{int(ids_out[slot])}", "name": e["name"], "list": pick(rng, WATCH_LISTS),
                 "program": pick(rng, ("asset freeze", "travel ban", "export restriction"))}
        if e["date_of_birth"] is not None or noise < 2 or rng.random() < 0.5:
            entry["date_of_birth"] = e["date_of_birth"]
        world["watchlist"].append(entry)


def _bank(rng, world, target: str, reference: str, name: tuple[str, str, str], control, noise: int) -> dict:
    """The bank records for ``target``; returns the application's ``bank_account`` section."""
    routing = pick(rng, sorted(BANKS))
    number = "".join(str(int(x)) for x in rng.integers(0, 10, size=int(rng.integers(10, 13))))
    accounts: dict[str, Any] = world["banks"].setdefault(routing, {})
    holder = _spell_business(rng, *name, noise) if business_key(reference) == business_key(" ".join(name)) \
        else _cased(rng, reference, noise)
    account = {"account_holder": holder, "account_type": pick(rng, BUSINESS_ACCOUNT_TYPES), "status": "open",
               "opened_on": (dt.date(2005, 1, 1) + dt.timedelta(days=int(rng.integers(0, 7000)))).isoformat()}
    if target == "holder_mismatch":
        if rng.random() < 0.5:
            account.update(account_type=pick(rng, PERSONAL_ACCOUNT_TYPES), account_holder=control["name"])
        else:
            account["account_holder"] = _other_business(rng, *name) if business_key(reference) == \
                business_key(" ".join(name)) else " ".join(name)
    elif target == "invalid" and rng.random() < 0.5:
        account["status"] = pick(rng, ("closed", "frozen"))
    if noise >= 1:
        account["status"] = _cased(rng, account["status"], noise)
    stored = number
    if target == "invalid" and account["status"].lower() == "open":  # not found: one digit differs
        k = int(rng.integers(len(number)))
        stored = number[:k] + str((int(number[k]) + 1 + int(rng.integers(9))) % 10) + number[k + 1:]
        if noise == 0:
            stored = None
    if stored is not None:
        accounts[stored] = {"account_number": stored, "routing_number": routing, "bank_name": BANKS[routing],
                            **account}
    return {"routing_number": routing, "account_number": number}


def _distractor_data(rng, world, key: str, reference: str, screened) -> None:
    world["credit"][key] = {"credit_score": int(rng.integers(300, 851)), "payment_index": int(rng.integers(40, 101)),
                            "open_trade_lines": int(rng.integers(0, 25)),
                            "last_updated": (_TODAY - dt.timedelta(days=int(rng.integers(1, 200)))).isoformat()}
    subjects = [reference, *(p["name"] for p in screened.values())]
    headlines = ("{} named in supplier payment dispute", "{} expands into new regional market",
                 "Local paper profiles {}", "{} fined over late filing, records show")
    for _ in range(int(rng.integers(1, 4))):
        world["media"].append({"subject": pick(rng, subjects), "headline": pick(rng, headlines),
                               "source": pick(rng, ("Harbour Gazette", "Metro Business Journal", "Trade Wire")),
                               "published": (_TODAY - dt.timedelta(days=int(rng.integers(1, 700)))).isoformat()})
