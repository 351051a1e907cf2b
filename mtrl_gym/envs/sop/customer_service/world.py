"""Seeded world generator of the CustomerService domain: one fault call and the systems behind it.

A *world* is a JSON-ready dict holding everything the support tools answer from: the
account record, the caller's passcode check, area incidents, per-device diagnostics, the
firmware policy, what a remote fix would change, and the mutable ``state`` the stateful
tools write (the ticket, remote actions, the escalation). It is a pure function of the
random generator and the difficulty, so the same seed gives the same world everywhere.

The generator first draws a *scenario* (the path the call takes through the SOP: an
ineligible account, an unknown caller, a wrong passcode, an area outage, or one of the
device faults) with fixed weights, so no outcome dominates; it then builds records that
realise it, adding secondary faults that the SOP's rule order must rank below the primary
one and, at higher ``noise``, irregular text and missing optional fields. The label is
never taken from the scenario: :func:`~mtrl_gym.envs.sop.customer_service.procedure.expected`
derives it from the records by the SOP's rules (the scenario is kept in ``world["meta"]``
only so tests can check the generator realises what it intended).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import pick, vary_case

__all__ = ["DIFFICULTY_LIMITS", "generate_world", "DEFAULT_DIFFICULTY", "SCENARIOS", "MODELS", "CATEGORIES",
           "REMEDY_ACTIONS"]

#: Default difficulty: record noise (0-2), distractor tools shown, devices on the account (1-4),
#: past tickets on the account at most (0-12).
DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "devices": 2, "history": 4}
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"devices": (1, 4), "history": (0, 12)}

#: Scenario -> weight. The weights keep every outcome and diagnosis class reasonably frequent, except the
#: early exits (an ineligible account, an unverified caller): their answers are the same on every task (no
#: ticket, every other field null), so they stay rare enough that submitting that one answer without a
#: tool call scores at most 2 % (``tests/sop/test_constant_baseline.py``).
SCENARIOS: dict[str, float] = {
    "ineligible": 0.012, "unknown_caller": 0.006, "bad_passcode": 0.006, "outage": 0.22, "line_fault": 0.14,
    "outdated_firmware": 0.15, "provisioning_error": 0.15, "device_fault": 0.18, "no_fault": 0.136}
#: Device model -> serial prefix.
MODELS: dict[str, str] = {"KB-Hub 3": "KBH3", "KB-Hub 4": "KBH4", "KB-Hub 5 Pro": "KBH5P"}
_MAJOR = {"KB-Hub 3": 3, "KB-Hub 4": 4, "KB-Hub 5 Pro": 5}
#: The reported-fault categories of the task (the ``category`` of ``open_ticket``).
CATEGORIES = ("no_service", "slow_speed", "intermittent")
#: Diagnosis -> the remote action the SOP prescribes for it.
REMEDY_ACTIONS = {"outdated_firmware": "firmware_update", "provisioning_error": "reprovision",
                  "device_fault": "reboot"}

_FIRST = ("Mara", "Tom", "Aisha", "Oskar", "Lena", "Ravi", "Ines", "Colm", "Yuki", "Pavel", "Nadia", "Hugo",
          "Sofia", "Emeka", "Greta", "Luis")
_LAST = ("Quinn", "Okafor", "Lindqvist", "Moreau", "Brandt", "Sato", "Novak", "Keane", "Haddad", "Silva",
         "Petrov", "Walsh")
_REGIONS = ("KS", "HL", "BR", "TW", "AV", "MD")
_RESIDENTIAL = ("Fibre 150", "Fibre 500", "Fibre 900")
_BUSINESS = ("Business Fibre 500", "Business Fibre 900")
_LOCATIONS = ("hallway", "living room", "office", "loft", "garage", "annex")
_BAD_PROVISIONING = ("profile_mismatch", "unprovisioned", "pending_activation")
_SUMMARIES = ("Fibre cable damage", "Exchange power failure", "Planned maintenance overrun", "Cabinet flooding")
_START = date(2024, 1, 1)
_HEX = "0123456789ABCDEF"


def _name(rng: np.random.Generator, last: str | None = None) -> str:
    return f"{pick(rng, _FIRST)} {last or pick(rng, _LAST)}"


def _version(parts) -> str:
    return ".".join(str(int(p)) for p in parts)


def _firmware_policy(rng: np.random.Generator) -> dict[str, dict[str, str]]:
    policy = {}
    for model, major in _MAJOR.items():
        minor, patch = int(rng.integers(2, 12)), int(rng.integers(0, 15))
        policy[model] = {"model": model, "minimum_version": _version((major, minor, patch)),
                         "recommended_version": _version((major, minor + int(rng.integers(1, 3)), 0))}
    return policy


def _firmware_at_least(rng: np.random.Generator, minimum: str) -> str:
    """A version >= ``minimum``: equal (a boundary case), or newer in the minor or patch part."""
    major, minor, patch = (int(p) for p in minimum.split("."))
    kind = int(rng.integers(3))
    if kind == 0:
        return minimum
    if kind == 1:
        return _version((major, minor, patch + int(rng.integers(1, 6))))
    return _version((major, minor + int(rng.integers(1, 3)), int(rng.integers(0, 20))))


def _firmware_below(rng: np.random.Generator, minimum: str) -> str:
    """A version < ``minimum``; often one that is *longer as text* (``4.3.12`` < ``4.10.0``)."""
    major, minor, patch = (int(p) for p in minimum.split("."))
    if patch > 0 and rng.random() < 0.4:
        return _version((major, minor, int(rng.integers(0, patch))))
    return _version((major, int(rng.integers(0, minor)), int(rng.integers(0, 20))))


def _devices(rng: np.random.Generator, n: int, policy) -> list[dict[str, Any]]:
    devices, suffixes = [], set()
    locations = [str(x) for x in rng.permutation(_LOCATIONS)]
    while len(devices) < n:
        model = pick(rng, tuple(MODELS))
        serial = MODELS[model] + "-" + "".join(_HEX[int(i)] for i in rng.integers(0, 16, size=8))
        if serial[-4:] in suffixes:
            continue
        suffixes.add(serial[-4:])
        installed = _START - timedelta(days=int(rng.integers(60, 1500)))
        devices.append({"serial": serial, "model": model, "location": locations[len(devices)],
                        "firmware": _firmware_at_least(rng, policy[model]["minimum_version"]),
                        "installed": installed.isoformat()})
    return devices


def _tickets(rng: np.random.Generator, call: date, history: int, account_no: int) -> list[dict[str, Any]]:
    """Past tickets: repeat contacts (the last 30 days) and older ones; boundary days included."""
    repeats = min(history, int(rng.choice(4, p=[0.35, 0.25, 0.25, 0.15])))
    older = int(rng.integers(0, history - repeats + 1))
    ages = []
    for k in range(repeats):
        ages.append(30 if k == 0 and rng.random() < 0.2 else int(rng.integers(1, 31)))
    for k in range(older):
        ages.append(31 if k == 0 and rng.random() < 0.25 else int(rng.integers(31, 400)))
    ages.sort(reverse=True)
    base = 30000 + account_no % 5000 + int(rng.integers(1000))
    out = []
    for i, age in enumerate(ages):
        out.append({"ticket_id": f"TKT-{base + 97 * i + int(rng.integers(90))}",
                    "opened": (call - timedelta(days=age)).isoformat(), "category": pick(rng, CATEGORIES),
                    "status": "open" if age < 3 and rng.random() < 0.3 else "closed"})
    return out


def _account(rng: np.random.Generator, scenario: str, call: date, d: Mapping[str, Any], policy) -> dict[str, Any]:
    number = int(rng.integers(100000, 1000000))
    last = pick(rng, _LAST)
    holder = _name(rng, last)
    users = sorted({n for n in (_name(rng, last) for _ in range(int(rng.integers(0, 3)))) if n != holder})
    business = rng.random() < 0.3
    status = "active"
    if scenario == "ineligible":
        status = pick(rng, ("suspended", "closed"))
    region = pick(rng, _REGIONS)
    postcode = f"{region}{int(rng.integers(1, 20))} {int(rng.integers(1, 10))}{pick(rng, 'ABDEFGHJLNPQRSTUWXYZ')}" \
               f"{pick(rng, 'ABDEFGHJLNPQRSTUWXYZ')}"
    return {"account_id": f"KB-{number}", "holder_name": holder, "authorised_users": users, "status": status,
            "plan": pick(rng, _BUSINESS if business else _RESIDENTIAL), "priority_care": bool(rng.random() < 0.2),
            "service_postcode": postcode, "devices": _devices(rng, d["devices"], policy),
            "tickets": _tickets(rng, call, d["history"], number)}


def _incident(rng: np.random.Generator, number: int, areas: list[str], status: str, call: date,
              hour: int | None = None) -> dict[str, Any]:
    hour = int(rng.integers(0, 12)) if hour is None else hour
    started = call - timedelta(days=0 if status == "active" else int(rng.integers(1, 6)))
    return {"incident_id": f"INC-{number}", "status": status, "areas": areas, "service": "fibre",
            "started": f"{started.isoformat()}T{hour:02d}:{int(rng.integers(60)):02d}",
            "summary": pick(rng, _SUMMARIES)}


def _incidents(rng: np.random.Generator, scenario: str, postcode: str, call: date) -> list[dict[str, Any]]:
    """Incidents of the customer's region: covering ones only in the outage scenario."""
    outward = postcode.split()[0]
    region = outward.rstrip("0123456789")
    others = [f"{region}{k}" for k in range(1, 20) if f"{region}{k}" != outward]
    number = int(rng.integers(40000, 90000))
    out = []
    for _ in range(int(rng.integers(0, 3))):  # active elsewhere in the region
        areas = sorted({str(x) for x in rng.choice(others, size=int(rng.integers(1, 3)), replace=False)})
        out.append(_incident(rng, number + len(out) * 13, areas, "active", call))
    if rng.random() < 0.5:  # covered the customer once, no longer active
        areas = sorted({outward, str(pick(rng, others))})
        out.append(_incident(rng, number + len(out) * 13, areas, pick(rng, ("resolved", "monitoring")), call))
    if scenario == "outage":
        hours = sorted(int(h) for h in rng.choice(12, size=2, replace=False))
        for k in range(1 + int(rng.random() < 0.25)):  # sometimes two cover: the earliest started wins
            areas = sorted({outward, *(str(x) for x in rng.choice(others, size=int(rng.integers(0, 3)),
                                                                   replace=False))})
            out.append(_incident(rng, number + len(out) * 13, areas, "active", call, hour=hours[k]))
    order = rng.permutation(len(out))
    return [out[int(i)] for i in order]


def _healthy(rng: np.random.Generator, device: Mapping[str, Any], boundary: bool) -> dict[str, Any]:
    """Diagnostics of a device with no fault; ``boundary`` puts readings exactly on the thresholds."""
    diag = {"device_serial": device["serial"], "model": device["model"], "los_alarm": False,
            "optical_rx_dbm": round(float(rng.uniform(-25.5, -10.0)), 1), "firmware": device["firmware"],
            "provisioning_state": "in_service", "packet_loss_pct": round(float(rng.uniform(0.0, 1.6)), 2),
            "crc_errors_24h": int(rng.integers(0, 3000)), "reboots_7d": int(rng.integers(0, 3)),
            "uptime_hours": int(rng.integers(2, 900))}
    if boundary:
        kind = int(rng.integers(3))
        if kind == 0:
            diag["optical_rx_dbm"] = pick(rng, (-27.0, -8.0))
        elif kind == 1:
            diag["packet_loss_pct"] = 2.0
        else:
            diag["crc_errors_24h"] = 5000
    return diag


def _inject(rng: np.random.Generator, rule: str, diag: dict[str, Any], device: dict[str, Any], policy,
            noise: int) -> None:
    """Make ``diag`` (and the account's ``device``) match the diagnosis rule ``rule``."""
    if rule == "line_fault":
        kind = int(rng.integers(4 if noise == 2 else 3))
        if kind == 0:
            diag["los_alarm"] = True
            diag["optical_rx_dbm"] = pick(rng, (None, round(float(rng.uniform(-40.0, -28.0)), 1)))
        elif kind == 1:
            diag["optical_rx_dbm"] = round(float(rng.uniform(-33.0, -27.1)), 1)
        elif kind == 2:
            diag["optical_rx_dbm"] = round(float(rng.uniform(-7.9, -4.0)), 1)
        else:
            diag["optical_rx_dbm"] = None
    elif rule == "outdated_firmware":
        device["firmware"] = diag["firmware"] = _firmware_below(rng, policy[device["model"]]["minimum_version"])
    elif rule == "provisioning_error":
        diag["provisioning_state"] = pick(rng, _BAD_PROVISIONING)
    elif rule == "device_fault":
        if rng.random() < 0.5:
            diag["packet_loss_pct"] = round(float(rng.uniform(2.01, 9.0)), 2)
        else:
            diag["crc_errors_24h"] = int(rng.integers(5001, 40000))


_RULES = ("line_fault", "outdated_firmware", "provisioning_error", "device_fault")


def _diagnostics(rng: np.random.Generator, scenario: str, account: dict[str, Any], target: int, policy,
                 noise: int) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """Per-device diagnostics and the remedy (what the prescribed remote action changes, if it works)."""
    out = {d["serial"]: _healthy(rng, d, rng.random() < 0.25) for d in account["devices"]}
    device = account["devices"][target]
    diag = out[device["serial"]]
    remedy = None
    if scenario == "outage":
        diag.update(los_alarm=True, optical_rx_dbm=None)
    elif scenario in _RULES:
        _inject(rng, scenario, diag, device, policy, noise)
        for later in _RULES[_RULES.index(scenario) + 1:]:  # secondary faults the rule order ranks lower
            if rng.random() < 0.25:
                _inject(rng, later, diag, device, policy, noise)
        if scenario == "device_fault":
            diag["reboots_7d"] = int(rng.integers(3, 6)) if rng.random() < 0.35 else int(rng.integers(0, 3))
        if scenario in REMEDY_ACTIONS and not (scenario == "device_fault" and diag["reboots_7d"] >= 3):
            patch = {"outdated_firmware": {"firmware": policy[device["model"]]["recommended_version"]},
                     "provisioning_error": {"provisioning_state": "in_service"},
                     "device_fault": {"packet_loss_pct": 0.1, "crc_errors_24h": int(rng.integers(0, 200))}}[scenario]
            remedy = {"device_serial": device["serial"], "action": REMEDY_ACTIONS[scenario],
                      "works": bool(rng.random() < 0.6), "patch": patch}
    if noise >= 2 and rng.random() < 0.3:
        del diag["firmware"]  # the SOP says: read it from the account's device record
    diag["provisioning_state"] = vary_case(rng, diag["provisioning_state"], noise)
    return out, remedy


def _caller(rng: np.random.Generator, scenario: str, account: Mapping[str, Any]) -> str:
    if scenario == "unknown_caller":
        known = {account["holder_name"], *account["authorised_users"]}
        last = account["holder_name"].split()[-1]
        while True:
            name = _name(rng, last if rng.random() < 0.6 else None)
            if name not in known:
                return name
    if account["authorised_users"] and rng.random() < 0.35:
        return pick(rng, account["authorised_users"])
    return account["holder_name"]


def _passcode(rng: np.random.Generator) -> str:
    return "".join(str(int(d)) for d in rng.integers(0, 10, size=int(rng.integers(4, 7))))


def _wrong_passcode(rng: np.random.Generator, passcode: str) -> str:
    """A near miss: two digits swapped, or one digit changed."""
    digits = list(passcode)
    i = int(rng.integers(len(digits) - 1))
    if digits[i] != digits[i + 1] and rng.random() < 0.5:
        digits[i], digits[i + 1] = digits[i + 1], digits[i]
    else:
        digits[i] = str((int(digits[i]) + 1 + int(rng.integers(9))) % 10)
    return "".join(digits)


def _noisy_account(rng: np.random.Generator, account: dict[str, Any], noise: int) -> None:
    """Irregular text (noise >= 1) and missing optional fields (noise 2), meaning unchanged."""
    account["holder_name"] = vary_case(rng, account["holder_name"], noise)
    account["authorised_users"] = [vary_case(rng, u, noise) for u in account["authorised_users"]]
    account["status"] = vary_case(rng, account["status"], noise)
    account["plan"] = vary_case(rng, account["plan"], noise)
    if noise >= 1 and rng.random() < 0.3:
        account["service_postcode"] = account["service_postcode"].lower()
    if noise >= 2:
        if not account["priority_care"] and rng.random() < 0.5:
            del account["priority_care"]
        if not account["authorised_users"] and rng.random() < 0.5:
            account["authorised_users"] = None


def _billing(rng: np.random.Generator, call: date, plan: str) -> list[dict[str, Any]]:
    amount = {"150": 29.0, "500": 39.0, "900": 54.0}[plan.split()[-1]] + (15.0 if plan.startswith("Business") else 0)
    return [{"invoice_id": f"INV-{int(rng.integers(10**6, 10**7))}",
             "period": (call.replace(day=1) - timedelta(days=28 * k)).strftime("%Y-%m"),
             "amount": amount, "paid": bool(k > 0 or rng.random() < 0.7)} for k in range(3)]


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One fault call and the records behind it; every draw comes from ``rng``."""
    d = difficulty
    names = list(SCENARIOS)
    scenario = names[int(rng.choice(len(names), p=np.array(list(SCENARIOS.values())) / sum(SCENARIOS.values())))]
    call = _START + timedelta(days=int(rng.integers(0, 366)))
    policy = _firmware_policy(rng)
    account = _account(rng, scenario, call, d, policy)
    target = int(rng.integers(len(account["devices"])))
    diagnostics, remedy = _diagnostics(rng, scenario, account, target, policy, d["noise"])
    passcode = _passcode(rng)
    serial = account["devices"][target]["serial"]
    label = serial[-4:].lower() if d["noise"] >= 1 and rng.random() < 0.4 else serial[-4:]
    inputs = {"call_date": call.isoformat(), "account_id": account["account_id"],
              "caller_name": _caller(rng, scenario, account),
              "passcode": _wrong_passcode(rng, passcode) if scenario == "bad_passcode" else passcode,
              "device_label": label, "reported_fault": pick(rng, CATEGORIES)}
    incidents = _incidents(rng, scenario, account["service_postcode"], call)
    for inc in incidents:
        inc["status"] = vary_case(rng, inc["status"], d["noise"])
    billing = _billing(rng, call, account["plan"])
    _noisy_account(rng, account, d["noise"])
    token = "ST-" + "".join(_HEX[int(i)] for i in rng.integers(0, 16, 12)).lower()
    return {
        "inputs": inputs, "account": account, "billing": billing,
        "auth": {"passcode": passcode, "session_token": token},
        "incidents": incidents, "diagnostics": diagnostics, "firmware_policy": policy, "remedy": remedy,
        "ticket_number": int(rng.integers(50000, 100000)), "queue_position": int(rng.integers(1, 40)),
        "state": {"authenticated": False, "failed_attempts": 0, "ticket": None, "actions": [], "escalation": None,
                  "callbacks": []},
        "meta": {"scenario": scenario, "device_serial": serial},
    }
