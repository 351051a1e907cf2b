"""The AircraftInspection SOP as code: its decision rules, the reference procedure and the oracle.

* The **rules** (:func:`engine_result`, :func:`gear_check`, :func:`avionics_check`,
  :func:`ad_state`, :func:`disposition`, ...) are small pure functions, one per SOP section,
  over records shaped like the tool results. Arithmetic on readings with one decimal is
  done in whole tenths, so a value exactly on a threshold lands where the SOP says.
* :func:`expected` is the reference procedure: the rules applied to the world's records
  directly (no tools); it returns the label, the final record of SOP section 9.
* :func:`oracle` is a scripted agent that follows the SOP using only the task inputs and
  what ``call(tool_name, arguments)`` returns, and records the inspection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date
from typing import Any

__all__ = ["expected", "oracle", "norm", "engine_result", "tyre_result", "brake_result", "gear_check",
           "worst", "fault_expired", "avionics_check", "ad_applies", "ad_state", "ad_summary", "disposition",
           "inspection_id", "OUTPUT_KEYS", "MEL_INTERVAL_DAYS"]

#: The keys of the final record, in SOP order.
OUTPUT_KEYS = ("engine_check", "landing_gear_check", "avionics_check", "ad_compliance", "overdue_ads",
               "disposition", "inspection_id")
#: Normalised MEL category -> rectification interval in days (SOP section 6).
MEL_INTERVAL_DAYS = {"b": 3, "c": 10, "d": 120}
_ORDER = ("pass", "monitor", "fail")


def norm(text: Any) -> str:
    """SOP section 2 text comparison: trimmed, inner spaces collapsed, case-folded."""
    return " ".join(str(text).split()).casefold()


def _tenths(value: float) -> int:
    return round(float(value) * 10)


def worst(results: Iterable[str]) -> str:
    """The worst of ``pass`` / ``monitor`` / ``fail`` results (``pass`` for none)."""
    return max(results, key=_ORDER.index, default="pass")


def engine_result(engine: Mapping[str, Any], flight_hours: float) -> str:
    """SOP step 2 for one engine."""
    scope = engine.get("last_borescope") or {}
    finding = norm(scope.get("finding", ""))
    egt = engine.get("egt_margin_c")
    oil = engine.get("oil_consumption_qt_hr") or 0.0
    vib = engine.get("vibration_ips") or 0.0
    if finding == "crack" or (egt is not None and egt < 5.0) or oil > 0.50 or vib > 1.50:
        return "fail"
    stale = scope.get("aircraft_fh") is not None and _tenths(flight_hours) - _tenths(scope["aircraft_fh"]) > 5000
    if finding == "minor erosion" or egt is None or egt < 15.0 or oil > 0.30 or vib > 1.00 or stale:
        return "monitor"
    return "pass"


def tyre_result(tyre: Mapping[str, Any]) -> str:
    """SOP step 3 for one tyre (pressures are whole psi: compared as pressure x 100 against rated x 90/95)."""
    tread, pressure, rated = tyre["tread_depth_mm"], tyre.get("pressure_psi"), tyre["rated_pressure_psi"]
    if tread < 1.6 or (pressure is not None and pressure * 100 < rated * 90):
        return "fail"
    if tread < 3.0 or pressure is None or pressure * 100 < rated * 95:
        return "monitor"
    return "pass"


def brake_result(brake: Mapping[str, Any]) -> str:
    """SOP step 3 for one brake."""
    wear = brake["wear_pin_mm"]
    return "fail" if wear < 1.0 else "monitor" if wear < 2.5 else "pass"


def gear_check(gear: Mapping[str, Any]) -> str:
    """SOP step 3: the worst tyre or brake result."""
    return worst([*(tyre_result(t) for t in gear["tyres"]), *(brake_result(b) for b in gear["brakes"])])


def fault_expired(first_reported: str, inspection_date: str, category: str) -> bool:
    """A deferrable fault is expired when more days than its interval have passed since it was reported."""
    days = (date.fromisoformat(inspection_date) - date.fromisoformat(first_reported)).days
    return days > MEL_INTERVAL_DAYS[norm(category)]


def avionics_check(active: Sequence[tuple[Mapping[str, Any], str]], inspection_date: str) -> str:
    """SOP step 4 from ``(active fault, its MEL category)`` pairs."""
    if not active:
        return "pass"
    for fault, category in active:
        if norm(category) not in MEL_INTERVAL_DAYS or fault_expired(fault["first_reported"], inspection_date,
                                                                     category):
            return "fail"
    return "deferred"


def ad_applies(ad: Mapping[str, Any], msn: int) -> bool:
    """SOP step 5: effective, and the MSN is within the applicability range (inclusive)."""
    span = ad["applicability"]
    return norm(ad["status"]) == "effective" and span["msn_from"] <= msn <= span["msn_to"]


def ad_state(ad: Mapping[str, Any], record: Mapping[str, Any], flight_hours: float, cycles: int) -> str:
    """SOP step 5 for one applicable AD: ``compliant``, ``due_soon`` or ``overdue``."""
    last = record.get("last_done")
    fh_interval, cycle_interval = ad.get("interval_fh"), ad.get("interval_cycles")
    if fh_interval is None and cycle_interval is None:
        return "compliant" if last else "overdue"
    if not last:
        return "overdue"
    left = []  # (remaining, due-soon margin) in tenths of FH or in cycles
    if fh_interval is not None:
        left.append((_tenths(last["aircraft_fh"]) + 10 * fh_interval - _tenths(flight_hours), 500))
    if cycle_interval is not None:
        left.append((last["aircraft_cycles"] + cycle_interval - cycles, 25))
    if any(remaining <= 0 for remaining, _ in left):
        return "overdue"
    if any(remaining <= margin for remaining, margin in left):
        return "due_soon"
    return "compliant"


def ad_summary(states: Mapping[str, str]) -> tuple[str, list[str]]:
    """``(ad_compliance, overdue_ads)`` from ``{ad_number: state}`` of the applicable ADs."""
    overdue = sorted(n for n, s in states.items() if s == "overdue")
    if overdue:
        return "overdue", overdue
    return ("due_soon" if "due_soon" in states.values() else "compliant"), []


def disposition(engine: str, gear: str, avionics: str, ad: str) -> str:
    """SOP step 6."""
    if "fail" in (engine, gear, avionics) or ad == "overdue":
        return "grounded"
    return "airworthy_with_deferrals" if avionics == "deferred" else "airworthy"


def inspection_id(inspection_date: str, number: int) -> str:
    """The id ``record_inspection`` assigns: ``RI-<year>-<number>``."""
    return f"RI-{inspection_date[:4]}-{number:05d}"


def _record(checks: Mapping[str, str], overdue: list[str], ident: str) -> dict[str, Any]:
    return {"engine_check": checks["engine"], "landing_gear_check": checks["gear"],
            "avionics_check": checks["avionics"], "ad_compliance": checks["ad"], "overdue_ads": overdue,
            "disposition": disposition(checks["engine"], checks["gear"], checks["avionics"], checks["ad"]),
            "inspection_id": ident}


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """The reference procedure: the SOP applied to the world's records; returns the final record."""
    inputs, aircraft = world["inputs"], world["aircraft"]
    fh = aircraft["flight_hours"]
    engine = worst(engine_result(world["engines"][e["serial"]], fh) for e in aircraft["engines"])
    mel = world["mel"]
    active = [(f, mel[f["fault_code"]]["category"]) for f in world["faults"] if norm(f["status"]) == "active"]
    states = {ad["ad_number"]: ad_state(ad, world["ad_records"][ad["ad_number"]], fh, aircraft["cycles"])
              for ad in world["ads"] if ad_applies(ad, aircraft["msn"])}
    ad, overdue = ad_summary(states)
    checks = {"engine": engine, "gear": gear_check(world["landing_gear"]),
              "avionics": avionics_check(active, inputs["inspection_date"]), "ad": ad}
    return _record(checks, overdue, inspection_id(inputs["inspection_date"], world["inspection_number"]))


def oracle(inputs: Mapping[str, Any], call: Callable[[str, dict[str, Any]], Any]) -> dict[str, Any]:
    """A scripted agent that follows the SOP through real tool calls and returns its final record."""
    tail = inputs["tail_number"]
    aircraft = call("get_aircraft", {"tail_number": tail})
    fh, kind = aircraft["flight_hours"], aircraft["type"]
    engine = worst(engine_result(call("get_engine_data", {"engine_serial": e["serial"]}), fh)
                   for e in aircraft["engines"])
    gear = gear_check(call("get_landing_gear", {"tail_number": tail}))
    faults = call("get_avionics_faults", {"tail_number": tail})["faults"]
    active = [(f, call("lookup_mel", {"aircraft_type": kind, "fault_code": f["fault_code"]})["category"])
              for f in faults if norm(f["status"]) == "active"]
    states = {}
    for ad in call("list_ads", {"aircraft_type": kind})["ads"]:
        if ad_applies(ad, aircraft["msn"]):
            record = call("get_ad_record", {"tail_number": tail, "ad_number": ad["ad_number"]})
            states[ad["ad_number"]] = ad_state(ad, record, fh, aircraft["cycles"])
    ad_result, overdue = ad_summary(states)
    checks = {"engine": engine, "gear": gear, "avionics": avionics_check(active, inputs["inspection_date"]),
              "ad": ad_result}
    answer = _record(checks, overdue, "")
    recorded = call("record_inspection", {
        "tail_number": tail, "inspector_id": inputs["inspector_id"], "engine_check": engine,
        "landing_gear_check": gear, "avionics_check": checks["avionics"], "ad_compliance": ad_result,
        "disposition": answer["disposition"]})
    answer["inspection_id"] = recorded["inspection_id"]
    return answer
