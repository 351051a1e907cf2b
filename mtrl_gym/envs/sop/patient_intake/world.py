"""The PatientIntake world generator: one intake form and the records the tools read.

:func:`generate_world` is a pure function of a numpy ``Generator`` and the difficulty. It
first draws the outcome of each SOP step (so labels are balanced by design: the care
pathway is uniform over its three values, insurance and pharmacy outcomes are drawn from
fixed mixes), then builds records that produce that outcome, with the traps the SOP warns
about. The label itself is never stored: :func:`~.procedure.expected` recomputes it by
applying the SOP to the records, and the tests check both agree.

Difficulty knobs (:data:`DEFAULT_DIFFICULTY`):

* ``noise`` (0, 1, 2): 0 clean records; 1 adds inconsistent case and spacing in free text,
  brand names, formatted member ids, stale eligibility ``status`` text, look-alike
  pharmacies and mixed-case severities; 2 also drops optional fields the SOP has rules for
  (open-ended ``coverage_end``, blank reactions, blank insurance or pharmacy sections) and
  lists one medication twice (brand and generic).
* ``distractors`` (bool): whether the distractor tools are offered (the env's concern).
* ``max_medications`` (2-10): the most medications a form lists (more lookups).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import pick
from mtrl_gym.envs.sop.patient_intake.catalog import (ALLERGENS, DISCOUNT_PLAN, FIRST_NAMES, LAST_NAMES, MEDICATIONS,
                                                      MILD_REACTIONS, PAYERS, PHARMACY_CHAINS, PHARMACY_STREETS,
                                                      SEVERE_REACTIONS, interaction)
from mtrl_gym.envs.sop.patient_intake.procedure import allergy_risk, medication_risk

__all__ = ["DIFFICULTY_LIMITS", "DEFAULT_DIFFICULTY", "draw_outcomes", "generate_world"]

DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "max_medications": 6}
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"max_medications": (2, 10)}
_FIRST_DAY = dt.date(2025, 1, 6)
_HIGH_ALERT = tuple(g for g, (_, _, ha) in MEDICATIONS.items() if ha)
_ORDINARY = tuple(g for g, (_, _, ha) in MEDICATIONS.items() if not ha)
_DEPARTMENTS = ("Family Medicine", "Internal Medicine", "Cardiology", "Endocrinology", "Pulmonology")


def _pairs_of(names: tuple[str, ...], severities: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((a, b) for i, a in enumerate(names) for b in names[i + 1:] if interaction(a, b) in severities)


_SERIOUS_PAIRS = _pairs_of(_ORDINARY, ("major", "contraindicated"))
_MODERATE_PAIRS = _pairs_of(_ORDINARY, ("moderate",))


def draw_outcomes(rng: np.random.Generator) -> dict[str, str]:
    """The outcome of each SOP step for one task (what the records will be built to produce).

    The pathway is uniform; within ``clinical_review`` about two tasks in three get a high
    medication risk and the others a high allergy risk, so neither risk field is dominated.
    """
    pathway = pick(rng, ("standard", "pharmacist_review", "clinical_review"))
    if pathway == "clinical_review":
        if rng.random() < 0.65:
            med, allergy = "high", pick(rng, ("none", "low", "high", "high"))
        else:
            med, allergy = pick(rng, ("low", "moderate")), "high"
    else:
        med, allergy = ("moderate" if pathway == "pharmacist_review" else "low"), pick(rng, ("none", "low"))
    insurance = pick(rng, ("verified", "verified", "inactive", "not_found", "self_pay"))
    r = rng.random()
    pharmacy = "not_provided" if r < 0.12 else "invalid" if r < 0.32 else \
        ("in_network" if rng.random() < 0.5 else "out_of_network")
    return {"care_pathway": pathway, "medication_risk": med, "allergy_risk": allergy,
            "insurance_status": insurance, "pharmacy_status": pharmacy}


def _vary(rng: np.random.Generator, text: str, noise: int) -> str:
    """``text`` with noisy case and spacing at noise >= 1 (equal after the SOP's comparison)."""
    if noise == 0:
        return text
    r = rng.random()
    text = text.upper() if r < 0.2 else text.lower() if r < 0.45 else text
    if rng.random() < 0.35:
        text = " " + text.replace(" ", "  ") + "  "
    return text


def _born(rng: np.random.Generator) -> str:
    return (dt.date(1940, 1, 1) + dt.timedelta(days=int(rng.integers(0, 29000)))).isoformat()


def _day(offset: int) -> dt.date:
    return _FIRST_DAY + dt.timedelta(days=offset)


def _draw_medications(rng: np.random.Generator, target: str, max_meds: int) -> list[str]:
    """Distinct generic names whose :func:`medication_risk` is ``target``."""
    for _ in range(2000):
        seed: list[str] = []
        if target == "high":
            seed = [pick(rng, _HIGH_ALERT)] if rng.random() < 0.6 else list(pick(rng, _SERIOUS_PAIRS))
            n = int(rng.integers(len(seed), max_meds + 1))
            pool = _ORDINARY + _HIGH_ALERT
        elif target == "moderate" and max_meds >= 5 and rng.random() < 0.3:
            n, pool = int(rng.integers(5, max_meds + 1)), _ORDINARY
        elif target == "moderate":
            seed = list(pick(rng, _MODERATE_PAIRS))
            n, pool = int(rng.integers(2, min(max_meds, 4) + 1)), _ORDINARY
        else:
            n, pool = int(rng.integers(0, min(max_meds, 4) + 1)), _ORDINARY
        rest = [g for g in pool if g not in seed]
        meds = seed + [rest[int(i)] for i in rng.choice(len(rest), size=n - len(seed), replace=False)]
        severities = [s for i, a in enumerate(meds) for b in meds[i + 1:] if (s := interaction(a, b))]
        if medication_risk(meds, [g for g in meds if MEDICATIONS[g][2]], severities) == target:
            return [meds[int(i)] for i in rng.permutation(len(meds))]
    raise RuntimeError(f"could not draw medications with risk {target!r}")  # pragma: no cover


def _form_medications(rng: np.random.Generator, generics: list[str], noise: int) -> list[dict[str, Any]]:
    out = []
    for g in generics:
        brands = MEDICATIONS[g][0]
        name = pick(rng, brands) if noise >= 1 and rng.random() < 0.4 else g
        dose = "20 units" if g.startswith("insulin") else f"{pick(rng, (5, 10, 20, 25, 40, 50, 100))} mg"
        out.append({"name": _vary(rng, name, noise), "dose": dose,
                    "frequency": pick(rng, ("once daily", "twice daily", "as needed", "at bedtime"))})
    if noise >= 2 and generics and rng.random() < 0.35:  # the same drug again, under its other name
        g = pick(rng, generics)
        out.insert(int(rng.integers(len(out) + 1)), {"name": pick(rng, (g, *MEDICATIONS[g][0])), "dose": "",
                                                     "frequency": "as needed"})
    return out


def _draw_allergies(rng: np.random.Generator, target: str, generics: list[str], noise: int) -> list[dict]:
    """Form allergy entries whose :func:`allergy_risk` (with these medications) is ``target``."""
    classes = [MEDICATIONS[g][1] for g in generics]
    safe = [s for s, (_, c, _) in ALLERGENS.items() if c not in classes]
    for _ in range(2000):
        if target == "none":
            return []
        picks = [safe[int(i)] for i in rng.choice(len(safe), size=int(rng.integers(1, 4)), replace=False)]
        entries = [{"substance": s, "reaction": pick(rng, MILD_REACTIONS)} for s in picks]
        if target == "high":
            conflicts = [s for s, (_, c, _) in ALLERGENS.items() if c in classes]
            r = rng.random()
            if conflicts and r < 0.4:
                entries[0] = {"substance": pick(rng, conflicts), "reaction": pick(rng, MILD_REACTIONS)}
            elif noise >= 2 and r < 0.6:
                entries[0] = {"substance": entries[0]["substance"]} if rng.random() < 0.5 else \
                    {**entries[0], "reaction": " "}
            else:
                entries[0]["reaction"] = pick(rng, SEVERE_REACTIONS)
        entries = [entries[int(i)] for i in rng.permutation(len(entries))]
        if allergy_risk([e.get("reaction") for e in entries], [ALLERGENS[e["substance"]][1] for e in entries],
                        classes) == target:
            return [_noisy_allergy(rng, e, noise) for e in entries]
    raise RuntimeError(f"could not draw allergies with risk {target!r}")  # pragma: no cover


def _noisy_allergy(rng: np.random.Generator, entry: dict[str, Any], noise: int) -> dict[str, Any]:
    synonyms = ALLERGENS[entry["substance"]][2]
    substance = pick(rng, synonyms) if noise >= 1 and synonyms and rng.random() < 0.4 else entry["substance"]
    out = {"substance": _vary(rng, substance, noise)}
    if "reaction" in entry:
        out["reaction"] = _vary(rng, entry["reaction"], noise) if entry["reaction"].strip() else entry["reaction"]
    return out


def _member_id_text(rng: np.random.Generator, member_id: str, noise: int) -> str:
    if noise == 0 or rng.random() < 0.3:
        return member_id
    prefix, digits = member_id[:3], member_id[3:]
    text = f"{prefix}-{digits[:4]} {digits[4:]}" if rng.random() < 0.5 else f"{prefix} {digits}"
    return text.lower() if rng.random() < 0.5 else text


def _insurance(rng: np.random.Generator, target: str, appointment: dt.date, noise: int):
    """``(form section or None or "absent", {payer_id: {member_id: record}})`` for ``target``."""
    if target == "self_pay":
        if noise >= 2 and rng.random() < 0.6:
            payer_id = pick(rng, sorted(PAYERS))
            return ({"payer_id": payer_id, "member_id": "  "} if rng.random() < 0.5 else
                    {"payer_id": "", "member_id": ""}), {}
        return ("absent" if noise >= 1 and rng.random() < 0.5 else None), {}
    payer_id = pick(rng, sorted(PAYERS))
    _, prefix, plans = PAYERS[payer_id]
    member_id = prefix + "".join(str(int(d)) for d in rng.integers(0, 10, size=8))
    plan_id, plan_name = pick(rng, plans)
    stored = member_id
    if target == "not_found":  # the payer knows a member whose id differs in one digit
        k = 3 + int(rng.integers(8))
        stored = member_id[:k] + str((int(member_id[k]) + 1 + int(rng.integers(9))) % 10) + member_id[k + 1:]
    start, end = _coverage_dates(rng, target, appointment)
    record: dict[str, Any] = {"member_id": stored, "plan_id": plan_id, "plan_name": plan_name,
                              "subscriber": "self", "coverage_start": start.isoformat(),
                              "coverage_end": end.isoformat() if end else None}
    active = target in ("verified", "not_found") and (end is None or end >= appointment)
    status = "active" if active else ("pending" if start > appointment else "terminated")
    if noise >= 1 and rng.random() < 0.35:
        status = "terminated" if active else "active"
    record["status"] = status
    if record["coverage_end"] is None and noise >= 2 and rng.random() < 0.5:
        del record["coverage_end"]
    form = {"payer_id": payer_id if noise == 0 or rng.random() < 0.7 else payer_id.lower(),
            "member_id": _member_id_text(rng, member_id, noise)}
    return form, {payer_id: {stored: record}}


def _coverage_dates(rng: np.random.Generator, target: str, appointment: dt.date):
    if target in ("verified", "not_found"):
        start = appointment - dt.timedelta(days=0 if rng.random() < 0.05 else int(rng.integers(1, 900)))
        r = rng.random()
        later = appointment + dt.timedelta(days=int(rng.integers(1, 400)))
        end = None if r < 0.4 else appointment if r < 0.5 else later
        return start, end
    if rng.random() < 0.7:  # ended before the appointment
        end = appointment - dt.timedelta(days=int(rng.integers(1, 200)))
        return end - dt.timedelta(days=int(rng.integers(90, 700))), end
    start = appointment + dt.timedelta(days=int(rng.integers(1, 60)))
    return start, (None if rng.random() < 0.5 else start + dt.timedelta(days=364))


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh PatientIntake world (JSON-ready) drawn with ``rng``; see the module docstring."""
    return _build(rng, difficulty, draw_outcomes(rng))


def _build(rng: np.random.Generator, d: Mapping[str, Any], outcome: Mapping[str, str]) -> dict[str, Any]:
    noise = d["noise"]
    intake_id = f"INT-{int(rng.integers(10000, 100000))}"
    appointment = _day(int(rng.integers(0, 330)))
    generics = _draw_medications(rng, outcome["medication_risk"], d["max_medications"])
    insurance, members = _insurance(rng, outcome["insurance_status"], appointment, noise)
    plan_id = next((r["plan_id"] for m in members.values() for r in m.values()), None)
    network_plan = plan_id if outcome["insurance_status"] == "verified" else DISCOUNT_PLAN
    pref, pharmacies, networks = _pharmacies(rng, outcome["pharmacy_status"], network_plan, plan_id, noise)
    form: dict[str, Any] = {
        "intake_id": intake_id,
        "patient": {"first_name": pick(rng, FIRST_NAMES), "last_name": pick(rng, LAST_NAMES),
                    "date_of_birth": _born(rng)},
        "appointment_date": appointment.isoformat(), "department": pick(rng, _DEPARTMENTS),
        "medications": _form_medications(rng, generics, noise),
        "allergies": _draw_allergies(rng, outcome["allergy_risk"], generics, noise),
    }
    if insurance != "absent":
        form["insurance"] = insurance
    if pref != "absent":
        form["preferred_pharmacy"] = pref
    slots = [{"department": pick(rng, _DEPARTMENTS), "date": _day(int(rng.integers(0, 340))).isoformat(),
              "time": f"{int(rng.integers(8, 17)):02d}:{pick(rng, ('00', '30'))}",
              "provider": f"Dr. {pick(rng, LAST_NAMES)}"} for _ in range(6)]
    style = {"severity_case": "lower" if noise == 0 else pick(rng, ("lower", "title", "upper")),
             "status_case": "lower" if noise == 0 else pick(rng, ("lower", "title", "upper"))}
    return {"intake_id": intake_id, "forms": {intake_id: form}, "members": members, "pharmacies": pharmacies,
            "networks": networks, "style": style, "slots": slots,
            "next_registration": int(rng.integers(10000, 100000)), "registrations": [], "messages": []}


def _pharmacies(rng: np.random.Generator, target: str, network_plan: str, own_plan: str | None, noise: int):
    """``(form section, directory records, {plan_id: {pharmacy_id: tier}})`` for ``target``."""
    chain = pick(rng, PHARMACY_CHAINS)
    zips = [f"97{int(z):03d}" for z in rng.choice(300, size=4, replace=False)]
    ids = iter(f"PH-{10_000 + int(i)}" for i in rng.choice(90_000, size=6, replace=False))
    records = []

    def add(name: str, zip_code: str, status: str) -> str:
        pid = next(ids)
        records.append({"pharmacy_id": pid, "name": name, "zip_code": zip_code, "status": status,
                        "address": f"{int(rng.integers(10, 3000))} {pick(rng, PHARMACY_STREETS)}",
                        "phone": f"503-555-{int(rng.integers(1000, 10000))}"})
        return pid

    own = None
    if target != "not_provided":
        listed = target != "invalid" or rng.random() < 0.5
        if listed:
            own = add(chain, zips[0], "open" if target != "invalid" else pick(rng, ("closed", "suspended")))
    for z in zips[1:1 + int(rng.integers(1, 3))]:  # other branches of the chain
        add(chain, z, pick(rng, ("open", "open", "closed")))
    if noise >= 1 or target == "invalid":
        add(f"{chain} Express", zips[0], "open")
    plans = sorted({network_plan, DISCOUNT_PLAN, own_plan} - {None})
    networks: dict[str, dict[str, str]] = {plan: {} for plan in plans}
    for rec in records:
        for plan in networks:
            networks[plan][rec["pharmacy_id"]] = pick(rng, ("preferred", "standard", "out_of_network"))
    if own is not None and target in ("in_network", "out_of_network"):
        good = target == "in_network"
        networks[network_plan][own] = pick(rng, ("preferred", "standard")) if good else "out_of_network"
        for plan in networks:  # the wrong plan gives the wrong answer
            if plan != network_plan and rng.random() < 0.7:
                networks[plan][own] = "out_of_network" if good else pick(rng, ("preferred", "standard"))
    if target == "not_provided":
        form: Any = {"name": "  ", "zip_code": zips[0]} if noise >= 2 and rng.random() < 0.5 else \
            ("absent" if noise >= 1 and rng.random() < 0.5 else None)
    else:
        form = {"name": _vary(rng, chain, noise), "zip_code": zips[0]}
    networks = {plan: {pid: t for pid, t in sorted(tiers.items()) if t != "out_of_network" or rng.random() < 0.5}
                for plan, tiers in sorted(networks.items())}
    return form, sorted(records, key=lambda r: (r["name"], r["zip_code"], r["pharmacy_id"])), networks
