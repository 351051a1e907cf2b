"""Seeded world generator of the AircraftInspection domain: one aircraft at its release inspection.

A *world* is a JSON-ready dict holding everything the maintenance tools answer from: the
aircraft, per-engine trend and borescope data, tyres and brakes, the avionics fault log and
the type's MEL, the AD list with compliance records, distractor data (flight schedule,
parts stock) and the mutable ``state`` that ``record_inspection`` writes. It is a pure
function of the random generator and the difficulty.

The generator first draws *targets*: the disposition (uniform over the three), then a
result for each check consistent with it (a grounded aircraft has at least one failing
check, and so on). It then builds records that realise the targets, with readings placed
exactly on thresholds now and then, irrelevant records (cleared faults, superseded or
out-of-range ADs) and, at higher ``noise``, irregular text and missing optional fields the
SOP has rules for. The label is never taken from the targets:
:func:`~mtrl_gym.envs.sop.aircraft_inspection.procedure.expected` derives it from the records
(``world["meta"]`` keeps the targets only so tests can check the generator).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import pick, vary_case

__all__ = ["DIFFICULTY_LIMITS", "generate_world", "DEFAULT_DIFFICULTY", "TYPES", "FAULT_CODES", "MEL_DAYS"]

#: Default difficulty: record noise (0-2), distractor tools shown, ADs listed for the type (1-8).
DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "ads": 4}
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"ads": (1, 8)}

#: Aircraft type -> engines, tyre and brake positions, MSN range, rated tyre pressure (nose, main).
TYPES: dict[str, dict[str, Any]] = {
    "HA-220": {"engines": 2, "tyres": ("NLG L", "NLG R", "MLG L", "MLG R"), "brakes": ("MLG L", "MLG R"),
               "msn": (1001, 1400), "rated": (85, 120)},
    "HA-340": {"engines": 2, "tyres": ("NLG L", "NLG R", "MLG L1", "MLG L2", "MLG R1", "MLG R2"),
               "brakes": ("MLG L1", "MLG L2", "MLG R1", "MLG R2"), "msn": (2001, 2600), "rated": (180, 205)},
    "HA-480": {"engines": 4, "tyres": ("NLG L", "NLG R", "MLG L1", "MLG L2", "MLG L3", "MLG R1", "MLG R2", "MLG R3"),
               "brakes": ("MLG L1", "MLG L2", "MLG L3", "MLG R1", "MLG R2", "MLG R3"), "msn": (3001, 3300),
               "rated": (190, 215)},
}
#: Avionics fault code -> system.
FAULT_CODES: dict[str, str] = {
    "22-11-04": "Autopilot servo, pitch", "22-31-02": "Flight director", "23-11-07": "HF radio 1",
    "23-24-01": "ACARS unit", "31-31-05": "Flight data recorder", "31-41-02": "Central maintenance computer",
    "34-11-03": "Air data computer 2", "34-21-06": "Attitude reference unit 1", "34-41-01": "Weather radar",
    "34-43-02": "TCAS processor", "34-51-08": "DME 2", "34-61-04": "FMS navigation database"}
#: MEL category -> rectification interval in days (None: not deferrable).
MEL_DAYS: dict[str, int | None] = {"B": 3, "C": 10, "D": 120, "NO-GO": None}
_SEVERITY = ("pass", "monitor", "fail")
_START = date(2024, 1, 1)
_SUBJECTS = ("Fuel pump wiring inspection", "Elevator hinge fitting", "Cabin oxygen generator",
             "Main landing gear side brace", "Engine fan blade ultrasonic check", "Pitot probe heater",
             "Wing spar cap corrosion", "Cargo door latch", "Rudder trim actuator", "APU fire bottle squib")


def _tenths(rng: np.random.Generator, low: int, high: int) -> float:
    """A reading with one decimal, uniform over ``[low, high]`` tenths (both inclusive)."""
    return int(rng.integers(low, high + 1)) / 10


def _targets(rng: np.random.Generator) -> dict[str, str]:
    """The result each check should have: a uniform disposition, then consistent check results."""
    disposition = pick(rng, ("airworthy", "airworthy_with_deferrals", "grounded"))
    targets = {"engine": "pass" if rng.random() < 0.55 else "monitor",
               "gear": "pass" if rng.random() < 0.55 else "monitor",
               "ad": "compliant" if rng.random() < 0.55 else "due_soon",
               "avionics": {"airworthy": "pass", "airworthy_with_deferrals": "deferred"}.get(
                   disposition, pick(rng, ("pass", "deferred"))), "disposition": disposition}
    if disposition == "grounded":
        fails = rng.random(4) < 0.4
        if not fails.any():
            fails[int(rng.integers(4))] = True
        for key, bad, hit in zip(("engine", "gear", "avionics", "ad"), ("fail", "fail", "fail", "overdue"), fails):
            if hit:
                targets[key] = bad
    return targets


def _spread(rng: np.random.Generator, n: int, worst: str) -> list[str]:
    """``n`` item results whose worst is ``worst``: one item has it, the others are no worse."""
    allowed = _SEVERITY[:_SEVERITY.index(worst) + 1]
    cuts = np.cumsum([0.65, 0.25, 0.1][:len(allowed)])
    draws = np.searchsorted(cuts / cuts[-1], rng.random(n), side="right")
    out = [allowed[min(int(k), len(allowed) - 1)] for k in draws]
    out[int(rng.integers(n))] = worst
    return out


def _engine(rng: np.random.Generator, serial: str, position: int, result: str, fh10: int, day: date,
            noise: int) -> dict[str, Any]:
    """Trend and borescope data of one engine whose SOP result is ``result``."""
    edge = rng.random() < 0.25
    egt = 15.0 if edge and rng.random() < 0.4 else _tenths(rng, 150, 450)
    oil = 0.30 if edge and rng.random() < 0.4 else int(rng.integers(5, 31)) / 100
    vib = 1.00 if edge and rng.random() < 0.4 else int(rng.integers(20, 101)) / 100
    age10 = 5000 if edge and rng.random() < 0.4 else int(rng.integers(0, 5001))
    finding = "no findings"
    if result == "monitor":
        causes = ["erosion", "egt", "oil", "vib", "age"] + (["egt_missing"] if noise >= 2 else [])
        picked = [pick(rng, causes) for _ in range(1 + int(rng.random() < 0.3))]
        for cause in dict.fromkeys(picked):  # distinct, in draw order (a set's order depends on the hash seed)
            if cause == "erosion":
                finding = "minor erosion"
            elif cause == "egt":
                egt = 5.0 if rng.random() < 0.2 else _tenths(rng, 50, 149)
            elif cause == "oil":
                oil = 0.50 if rng.random() < 0.2 else int(rng.integers(31, 51)) / 100
            elif cause == "vib":
                vib = 1.50 if rng.random() < 0.2 else int(rng.integers(101, 151)) / 100
            elif cause == "age":
                age10 = int(rng.integers(5001, 9000))
            else:
                egt = None
    elif result == "fail":
        cause = pick(rng, ("crack", "egt", "oil", "vib"))
        if cause == "crack":
            finding = "crack"
        elif cause == "egt":
            egt = _tenths(rng, -60, 49)
        elif cause == "oil":
            oil = int(rng.integers(51, 90)) / 100
        else:
            vib = int(rng.integers(151, 260)) / 100
    scope_day = day - timedelta(days=age10 // 80 + int(rng.integers(0, 5)))
    record = {"engine_serial": serial, "position": position, "egt_margin_c": egt, "oil_consumption_qt_hr": oil,
              "vibration_ips": vib, "last_borescope": {"date": scope_day.isoformat(),
                                                       "aircraft_fh": (fh10 - age10) / 10,
                                                       "finding": vary_case(rng, finding, noise)}}
    if egt is None and rng.random() < 0.5:
        del record["egt_margin_c"]
    return record


def _tyre(rng: np.random.Generator, position: str, rated: int, result: str, noise: int) -> dict[str, Any]:
    ok_low, warn_low = -(-rated * 95 // 100), -(-rated * 90 // 100)  # lowest pressures not below 95 % / 90 %
    tread = 3.0 if rng.random() < 0.1 else _tenths(rng, 30, 95)
    pressure: int | None = ok_low if rng.random() < 0.15 else int(rng.integers(ok_low, rated + 6))
    if result == "monitor":
        cause = pick(rng, ("tread", "pressure", "missing") if noise >= 2 else ("tread", "pressure"))
        if cause == "tread":
            tread = 1.6 if rng.random() < 0.2 else _tenths(rng, 16, 29)
        elif cause == "pressure":
            pressure = warn_low if rng.random() < 0.3 else int(rng.integers(warn_low, ok_low))
        else:
            pressure = None
    elif result == "fail":
        if rng.random() < 0.5:
            tread = _tenths(rng, 3, 15)
        else:
            pressure = int(rng.integers(-(-rated * 70 // 100), warn_low))
    return {"position": position, "tread_depth_mm": tread, "pressure_psi": pressure, "rated_pressure_psi": rated}


def _brake(rng: np.random.Generator, position: str, result: str) -> dict[str, Any]:
    low, high = {"pass": (25, 80), "monitor": (10, 24), "fail": (1, 9)}[result]
    edge = {"pass": 2.5, "monitor": 1.0}.get(result)
    wear = edge if edge is not None and rng.random() < 0.15 else _tenths(rng, low, high)
    return {"position": position, "wear_pin_mm": wear}


def _landing_gear(rng: np.random.Generator, spec: Mapping[str, Any], tail: str, result: str,
                  noise: int) -> dict[str, Any]:
    n_tyres, n_brakes = len(spec["tyres"]), len(spec["brakes"])
    results = _spread(rng, n_tyres + n_brakes, result)
    tyres = [_tyre(rng, pos, spec["rated"][0] if pos.startswith("NLG") else spec["rated"][1], results[i], noise)
             for i, pos in enumerate(spec["tyres"])]
    for tyre in tyres:
        if tyre["pressure_psi"] is None and rng.random() < 0.5:
            del tyre["pressure_psi"]
    brakes = [_brake(rng, pos, results[n_tyres + i]) for i, pos in enumerate(spec["brakes"])]
    return {"tail_number": tail, "tyres": tyres, "brakes": brakes}


def _mel(rng: np.random.Generator) -> dict[str, dict[str, Any]]:
    """The type's MEL entry for every fault code; each category appears at least twice."""
    categories = ["B", "B", "B", "C", "C", "C", "D", "D", "NO-GO", "NO-GO", "NO-GO", pick(rng, ("B", "C", "D"))]
    order = rng.permutation(len(categories))
    mel = {}
    for k, code in enumerate(FAULT_CODES):
        category = categories[int(order[k])]
        mel[code] = {"fault_code": code, "mel_item": f"{code}-0{int(rng.integers(1, 4))}", "category": category,
                     "remarks": "Aircraft may not be dispatched." if category == "NO-GO"
                     else "May be deferred; placard the affected system."}
    return mel


def _faults(rng: np.random.Generator, mel: Mapping[str, Mapping[str, Any]], result: str, day: date,
            noise: int) -> list[dict[str, Any]]:
    """The avionics fault log: active faults realising ``result`` plus cleared history."""
    deferrable = [c for c, m in mel.items() if m["category"] != "NO-GO"]
    no_go = [c for c, m in mel.items() if m["category"] == "NO-GO"]
    active: list[tuple[str, int]] = []  # (code, days since first reported)

    def deferred(code: str) -> tuple[str, int]:
        days = MEL_DAYS[mel[code]["category"]]
        return code, days if rng.random() < 0.25 else int(rng.integers(0, days + 1))

    if result in ("deferred", "fail"):
        count = int(rng.integers(0 if result == "fail" else 1, 3))
        active += [deferred(str(c)) for c in rng.choice(deferrable, size=count, replace=False)]
    if result == "fail":
        used = {c for c, _ in active}
        if rng.random() < 0.5:
            active.append((pick(rng, [c for c in no_go if c not in used]), int(rng.integers(0, 6))))
        else:
            code = pick(rng, [c for c in deferrable if c not in used])
            days = MEL_DAYS[mel[code]["category"]]
            active.append((code, days + 1 if rng.random() < 0.4 else days + int(rng.integers(2, 30))))
    used = {c for c, _ in active}
    cleared = [str(c) for c in rng.choice([c for c in FAULT_CODES if c not in used], size=int(rng.integers(0, 3)),
                                          replace=False)]
    log = [{"fault_code": code, "system": FAULT_CODES[code], "status": "active",
            "first_reported": (day - timedelta(days=age)).isoformat()} for code, age in active]
    log += [{"fault_code": code, "system": FAULT_CODES[code], "status": "cleared",
             "first_reported": (day - timedelta(days=int(rng.integers(3, 200)))).isoformat()} for code in cleared]
    log = [log[int(i)] for i in rng.permutation(len(log))]
    for entry in log:
        entry["status"] = vary_case(rng, entry["status"], noise)
    return log


def _ad_states(rng: np.random.Generator, n: int, result: str) -> list[tuple[bool, str]]:
    """``(applies, state)`` of each listed AD so that the applicable ones give ``result``."""
    applies = [bool(rng.random() >= 0.3) for _ in range(n)]
    if result != "compliant" and not any(applies):
        applies[int(rng.integers(n))] = True
    states = []
    for a in applies:
        if a:
            states.append("compliant" if result == "compliant" or rng.random() < 0.6
                          else pick(rng, ("compliant", "due_soon", "overdue")[:2 if result == "due_soon" else 3]))
        else:  # never applies, so any state (an overdue-looking one is a trap)
            states.append(pick(rng, ("compliant", "due_soon", "overdue")))
    hits = [i for i, a in enumerate(applies) if a]
    if result != "compliant" and not any(states[i] == result for i in hits):
        states[pick(rng, hits)] = result
    return list(zip(applies, states))


def _last_done(rng: np.random.Generator, fh_used10: int, cyc_used: int, aircraft: Mapping[str, Any],
               day: date) -> dict[str, Any]:
    return {"date": (day - timedelta(days=fh_used10 // 80 + 1)).isoformat(),
            "aircraft_fh": (round(aircraft["flight_hours"] * 10) - fh_used10) / 10,
            "aircraft_cycles": aircraft["cycles"] - cyc_used}


def _ad(rng: np.random.Generator, number: str, applies: bool, state: str, aircraft: Mapping[str, Any],
        day: date, noise: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """One listed AD and its compliance record, realising ``state`` for this aircraft."""
    low, high = TYPES[aircraft["type"]]["msn"]
    msn = aircraft["msn"]
    if applies:
        span = (int(rng.integers(low, msn + 1)), int(rng.integers(msn, high + 1)))
        status = "effective"
    elif rng.random() < 0.6 and (msn > low or msn < high):
        span = (low, msn - 1) if msn > low and (msn == high or rng.random() < 0.5) else (msn + 1, high)
        status = "effective"
    else:
        span, status = (low, high), "superseded"
    one_time = state != "due_soon" and rng.random() < 0.2
    fh_iv = None if one_time or rng.random() < 0.3 else int(pick(rng, (300, 600, 1200, 3000)))
    cyc_iv = None if one_time or (fh_iv is not None and rng.random() < 0.55) \
        else int(pick(rng, (200, 500, 1000, 2000)))
    ad = {"ad_number": number, "subject": pick(rng, _SUBJECTS), "status": vary_case(rng, status, noise),
          "applicability": {"types": [aircraft["type"]], "msn_from": span[0], "msn_to": span[1]},
          "interval_fh": fh_iv, "interval_cycles": cyc_iv}
    record: dict[str, Any] = {"ad_number": number}
    if one_time:
        record["last_done"] = None if state == "overdue" else _last_done(
            rng, int(rng.integers(10, 20000)), int(rng.integers(5, 3000)), aircraft, day)
        return ad, record
    if state == "overdue" and rng.random() < 0.25:
        record["last_done"] = None
        return ad, record
    given = [k for k, iv in (("fh", fh_iv), ("cyc", cyc_iv)) if iv is not None]
    critical = pick(rng, given)
    remaining = {}  # tenths of FH / cycles left before the due point
    for key in given:
        iv10 = fh_iv * 10 if key == "fh" else cyc_iv
        margin = 500 if key == "fh" else 25
        if key != critical or state == "compliant":
            remaining[key] = margin + 1 if rng.random() < 0.15 else int(rng.integers(margin + 1, iv10 + 1))
        elif state == "due_soon":
            remaining[key] = margin if rng.random() < 0.25 else int(rng.integers(1, margin + 1))
        else:
            remaining[key] = 0 if rng.random() < 0.25 else -int(rng.integers(1, iv10 // 2))
    fh_used10 = fh_iv * 10 - remaining["fh"] if "fh" in remaining else (cyc_iv - remaining["cyc"]) * 16
    cyc_used = cyc_iv - remaining["cyc"] if "cyc" in remaining else fh_used10 // 16
    record["last_done"] = _last_done(rng, fh_used10, cyc_used, aircraft, day)
    return ad, record


def _aircraft(rng: np.random.Generator) -> dict[str, Any]:
    kind = pick(rng, tuple(TYPES))
    spec = TYPES[kind]
    fh10 = int(rng.integers(50000, 400001))
    first = int(rng.integers(10000, 90000))
    return {"tail_number": f"N{int(rng.integers(100, 1000))}HA", "type": kind,
            "msn": int(rng.integers(spec["msn"][0], spec["msn"][1] + 1)), "flight_hours": fh10 / 10,
            "cycles": fh10 // 16 + int(rng.integers(-300, 300)),
            "engines": [{"position": k + 1, "serial": f"EN-{first + 7 * k + int(rng.integers(7))}"}
                        for k in range(spec["engines"])]}


def _distractor_data(rng: np.random.Generator, tail: str, day: date) -> tuple[list[dict], dict[str, dict]]:
    airports = ("OSL", "BGO", "TRD", "SVG", "KRS", "AES", "TOS", "BOO")
    schedule = []
    for k in range(3):
        i, j = int(rng.integers(len(airports))), int(rng.integers(1, len(airports)))
        origin, dest = airports[i], airports[(i + j) % len(airports)]
        schedule.append({"flight": f"HN{int(rng.integers(100, 1000))}", "tail_number": tail, "from": origin,
                         "to": dest, "departure": f"{(day + timedelta(days=k // 2)).isoformat()}T"
                                                  f"{int(rng.integers(6, 22)):02d}:{5 * int(rng.integers(12)):02d}"})
    parts = {}
    for name in ("tyre, main wheel", "tyre, nose wheel", "brake unit", "air data computer", "DME transceiver"):
        number = f"P{int(rng.integers(10000, 99999))}"
        parts[number] = {"part_number": number, "description": name, "on_hand": int(rng.integers(0, 6)),
                         "store": pick(rng, ("main store", "line store"))}
    return schedule, parts


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One aircraft at its release inspection and every record behind it; every draw comes from ``rng``."""
    d = difficulty
    noise = d["noise"]
    targets = _targets(rng)
    day = _START + timedelta(days=int(rng.integers(0, 366)))
    aircraft = _aircraft(rng)
    spec = TYPES[aircraft["type"]]
    fh10 = round(aircraft["flight_hours"] * 10)
    engines = {}
    for engine, result in zip(aircraft["engines"], _spread(rng, spec["engines"], targets["engine"])):
        engines[engine["serial"]] = _engine(rng, engine["serial"], engine["position"], result, fh10, day, noise)
    gear = _landing_gear(rng, spec, aircraft["tail_number"], targets["gear"], noise)
    mel = _mel(rng)
    faults = _faults(rng, mel, targets["avionics"], day, noise)
    for entry in mel.values():
        entry["category"] = vary_case(rng, entry["category"], noise)
    ads, records = [], {}
    year = int(rng.integers(2012, 2023))
    for k, (applies, state) in enumerate(_ad_states(rng, d["ads"], targets["ad"])):
        number = f"AD-{year + k // 3}-{int(rng.integers(100, 999)):03d}{k}"
        ad, record = _ad(rng, number, applies, state, aircraft, day, noise)
        if noise >= 2 and record.get("last_done", 0) is None and rng.random() < 0.5:
            del record["last_done"]
        ads.append(ad)
        records[number] = record
    schedule, parts = _distractor_data(rng, aircraft["tail_number"], day)
    record_aircraft = {**aircraft, "type": vary_case(rng, aircraft["type"], noise)}
    return {
        "inputs": {"tail_number": aircraft["tail_number"], "inspection_date": day.isoformat(),
                   "inspector_id": f"LIC-{int(rng.integers(1000, 10000))}"},
        "aircraft": record_aircraft, "engines": engines, "landing_gear": gear, "faults": faults, "mel": mel,
        "ads": ads, "ad_records": records, "schedule": schedule, "parts": parts,
        "inspection_number": int(rng.integers(1000, 100000)), "state": {"inspection": None, "amendments": 0},
        "meta": {"targets": targets},
    }
