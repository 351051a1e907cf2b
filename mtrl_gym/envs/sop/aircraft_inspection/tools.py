"""The maintenance-system tools of the AircraftInspection domain, answering from the episode's world.

Each tool reads ``ctx.state`` (the world of :mod:`~mtrl_gym.envs.sop.aircraft_inspection.world`,
deep-copied by the sandbox on every reset) and answers like a JSON API. ``record_inspection``
is the stateful action: it stores the inspection and returns its id (a second call amends
the same record). Unknown tail numbers, engines, AD numbers, fault codes and types raise
:class:`ToolError`. ``get_flight_schedule`` and ``get_parts_stock`` are distractors:
plausible, never needed by the SOP.

Tools return the world's own records (not copies): the sandbox renders a result to
text at once, and the world is the episode's private copy.
"""

from __future__ import annotations

from typing import Any, Literal

from mtrl_gym.envs.sandbox.tools import ToolContext, ToolError, ToolSet, tool
from mtrl_gym.envs.sop.aircraft_inspection.procedure import inspection_id, norm
from mtrl_gym.envs.sop.kit import Records, lookup_tool

__all__ = ["TOOLS", "DISTRACTOR_TOOLS", "get_aircraft", "get_engine_data", "get_landing_gear",
           "get_avionics_faults", "lookup_mel", "list_ads", "get_ad_record", "record_inspection",
           "get_flight_schedule", "get_parts_stock"]


def _check_tail(ctx: ToolContext, tail_number: str) -> str:
    tail = ctx.state["inputs"]["tail_number"]
    if tail_number.strip().upper() != tail:
        raise ToolError(f"no aircraft {tail_number!r} at this station (registrations look like 'N417HA')")
    return tail


def _check_type(ctx: ToolContext, aircraft_type: str) -> None:
    actual = norm(ctx.state["aircraft"]["type"]).upper()
    if norm(aircraft_type).upper() != actual:
        raise ToolError(f"no data loaded for aircraft type {aircraft_type!r}; this station holds type {actual}")


@tool
def get_aircraft(ctx: ToolContext, tail_number: str) -> dict[str, Any]:
    """The aircraft record: type, manufacturer serial number (msn), flight hours, cycles, installed engines.

    Args:
        tail_number: The registration, e.g. "N417HA".
    """
    _check_tail(ctx, tail_number)
    return ctx.state["aircraft"]


get_engine_data = lookup_tool("get_engine_data",
                              Records("engines", "no engine {!r}; installed engines are listed by get_aircraft"),
                              "engine_serial", "Trend monitoring and the last borescope inspection of one engine.",
                              'The engine serial number, e.g. "EN-40213".')


@tool
def get_landing_gear(ctx: ToolContext, tail_number: str) -> dict[str, Any]:
    """Tyre tread depths and pressures and brake wear-pin lengths from the line check.

    Args:
        tail_number: The registration.
    """
    _check_tail(ctx, tail_number)
    return ctx.state["landing_gear"]


@tool
def get_avionics_faults(ctx: ToolContext, tail_number: str) -> dict[str, Any]:
    """The avionics fault log (built-in test results): active and cleared faults.

    Args:
        tail_number: The registration.
    """
    tail = _check_tail(ctx, tail_number)
    return {"tail_number": tail, "faults": ctx.state["faults"]}


@tool
def lookup_mel(ctx: ToolContext, aircraft_type: str, fault_code: str) -> dict[str, Any]:
    """The minimum equipment list (MEL) entry of a fault code for an aircraft type.

    Args:
        aircraft_type: The aircraft type, e.g. "HA-340".
        fault_code: The fault code, e.g. "34-11-03".
    """
    _check_type(ctx, aircraft_type)
    entry = ctx.state["mel"].get(fault_code.strip())
    if entry is None:
        raise ToolError(f"no MEL entry for fault code {fault_code!r}; codes look like '34-11-03'")
    return dict(entry)


@tool
def list_ads(ctx: ToolContext, aircraft_type: str) -> dict[str, Any]:
    """The airworthiness directives issued for an aircraft type, with applicability and intervals.

    Args:
        aircraft_type: The aircraft type, e.g. "HA-340".
    """
    _check_type(ctx, aircraft_type)
    return {"aircraft_type": norm(aircraft_type).upper(), "ads": ctx.state["ads"]}


@tool
def get_ad_record(ctx: ToolContext, tail_number: str, ad_number: str) -> dict[str, Any]:
    """The compliance record of one airworthiness directive on one aircraft (last accomplishment).

    Args:
        tail_number: The registration.
        ad_number: The AD number, e.g. "AD-2019-4120".
    """
    _check_tail(ctx, tail_number)
    record = ctx.state["ad_records"].get(ad_number.strip().upper())
    if record is None:
        raise ToolError(f"no AD {ad_number!r} for this aircraft type; list_ads lists them")
    return record


_CHECK = Literal["pass", "monitor", "fail"]


@tool
def record_inspection(ctx: ToolContext, tail_number: str, inspector_id: str, engine_check: _CHECK,
                      landing_gear_check: _CHECK, avionics_check: Literal["pass", "deferred", "fail"],
                      ad_compliance: Literal["compliant", "due_soon", "overdue"],
                      disposition: Literal["airworthy", "airworthy_with_deferrals", "grounded"]) -> dict[str, Any]:
    """Record the release inspection in the maintenance system; returns the inspection id.

    Args:
        tail_number: The registration.
        inspector_id: The certifying inspector's licence id, e.g. "LIC-4821".
        engine_check: Result of the engine check.
        landing_gear_check: Result of the landing gear check.
        avionics_check: Result of the avionics check.
        ad_compliance: Result of the AD review.
        disposition: The release disposition.
    """
    tail = _check_tail(ctx, tail_number)
    ident = inspector_id.strip().upper()
    if not (ident.startswith("LIC-") and ident[4:].isdigit() and ident[4:].isascii() and len(ident) == 8):
        raise ToolError(f"{inspector_id!r} is not an inspector licence id; they look like 'LIC-4821'")
    state = ctx.state["state"]
    number = inspection_id(ctx.state["inputs"]["inspection_date"], ctx.state["inspection_number"])
    status = "recorded" if state["inspection"] is None else "amended"
    if status == "amended":
        state["amendments"] += 1
    state["inspection"] = {"inspection_id": number, "tail_number": tail, "inspector_id": ident,
                           "engine_check": engine_check, "landing_gear_check": landing_gear_check,
                           "avionics_check": avionics_check, "ad_compliance": ad_compliance,
                           "disposition": disposition}
    return {"inspection_id": number, "tail_number": tail, "status": status,
            "date": ctx.state["inputs"]["inspection_date"]}


@tool
def get_flight_schedule(ctx: ToolContext, tail_number: str) -> dict[str, Any]:
    """The aircraft's next scheduled flights.

    Args:
        tail_number: The registration.
    """
    tail = _check_tail(ctx, tail_number)
    return {"tail_number": tail, "flights": ctx.state["schedule"]}


@tool
def get_parts_stock(ctx: ToolContext, part_number: str) -> dict[str, Any]:
    """Stock of a spare part in the station stores.

    Args:
        part_number: The part number, e.g. "P40213".
    """
    part = ctx.state["parts"].get(part_number.strip().upper())
    if part is None:
        raise ToolError(f"no part {part_number!r} in the catalogue")
    return dict(part)


#: Every tool of the domain, in the order the system prompt lists them.
TOOLS = ToolSet([get_aircraft, get_engine_data, get_landing_gear, get_avionics_faults, lookup_mel, list_ads,
                 get_ad_record, record_inspection, get_flight_schedule, get_parts_stock])
#: Tools the SOP never needs (hidden when the difficulty turns distractors off).
DISTRACTOR_TOOLS = ("get_flight_schedule", "get_parts_stock")
