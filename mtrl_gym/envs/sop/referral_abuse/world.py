"""World generator of the ReferralAbuse domain: a referrer, its referrals, and the referred accounts.

Outcome first: the severity is drawn uniformly, then the referrer's prior warnings, then a
combination of (flagged referrals, shared payment, velocity) that produces that severity
under SOP RP-7, then per-referral indicator sets, and only then the raw records (device
ids, card fingerprints, addresses, timestamps, activity counts) that realise them.
Timestamps keep clear margins from every date and 10-minute boundary, so a correct
reading of the records is never a coin flip. ``world["plan"]`` keeps the intent (never
shown by a tool) for tests.

Noise levels: 0 — only reviewed referrals, UTC timestamps, clean statuses and addresses.
1 — cancelled and out-of-window referrals (whose accounts may share devices with
reviewed ones: they must not count), addresses in other case and punctuation, activity
counts missing or unavailable, withheld bonuses, statuses in other case. 2 — more of each,
timestamps with UTC offsets, near-miss addresses (another apartment number).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np

from mtrl_gym.envs.sop.kit import ids, pick

__all__ = ["DEFAULT_DIFFICULTY", "DIFFICULTY_LIMITS", "MIN_REFERRALS", "MAX_REFERRALS", "generate_world", "severity_of",
           "SEVERITIES", "ACTIONS", "INDICATORS", "ACTION_MATRIX", "WINDOW_DAYS", "VELOCITY_DAYS", "VELOCITY_MIN",
           "RAPID_MINUTES", "LOW_ACTIVITY_BELOW"]

SEVERITIES = ("none", "low", "medium", "high")
#: Range of the ``referrals`` difficulty knob (the most reviewed referrals in a task).
MIN_REFERRALS, MAX_REFERRALS = 3, 10
DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "referrals": 6}
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"referrals": (MIN_REFERRALS, MAX_REFERRALS)}
ACTIONS = ("no_action", "monitor", "warn", "claw_back", "suspend")
INDICATORS = ("shared_device", "shared_payment", "shared_address", "rapid_signup", "low_activity")
#: (severity, has prior warnings) -> action (SOP section 5).
ACTION_MATRIX = {("none", False): "no_action", ("none", True): "no_action", ("low", False): "monitor",
                 ("low", True): "warn", ("medium", False): "warn", ("medium", True): "claw_back",
                 ("high", False): "claw_back", ("high", True): "suspend"}
WINDOW_DAYS = 90
VELOCITY_DAYS = 7
VELOCITY_MIN = 5
RAPID_MINUTES = 10
LOW_ACTIVITY_BELOW = 3
_SOFT = ("shared_device", "shared_address", "rapid_signup", "low_activity")
_BONUSES = (25, 40, 50, 75, 100)
_FIRST = ("Ana", "Ben", "Chloe", "Dev", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kai", "Lena", "Mira",
          "Noah", "Olga", "Pablo", "Rosa", "Sami", "Tess", "Umar", "Vera", "Wim", "Yara", "Zoe")
_LAST = ("Novak", "Okafor", "Petrov", "Quinn", "Rossi", "Silva", "Tanaka", "Ulrich", "Varga", "Weber", "Jensen",
         "Moreau", "Kowalski", "Haddad", "Lindqvist", "Brandt")
_STREETS = ("Linden Street", "Harbour Road", "Mill Lane", "Church Street", "Station Road", "Oak Avenue",
            "Canal Street", "Park Lane", "Market Square", "Willow Way", "Bridge Street", "Elm Grove")
_CITIES = (("1012", "Amsterdam"), ("80331", "Munich"), ("75011", "Paris"), ("1050", "Brussels"),
           ("00-950", "Warsaw"), ("2100", "Copenhagen"), ("08001", "Barcelona"), ("1010", "Vienna"))
_SEGMENTS = ("retail", "student", "premium", "business")
_BASE_DAY = date(2024, 1, 1)


def severity_of(flagged: int, payment: bool, velocity: bool) -> str:
    """SOP section 4: severity from the flagged count and the two escalations."""
    level = min(flagged, 3)
    if payment:
        level = max(level, 2)
    if velocity:
        level = min(level + 1, 3)
    return SEVERITIES[level]


def _combos(n: int, target: str) -> list[tuple[int, bool, bool]]:
    """(flagged, shared payment, velocity) combinations over ``n`` reviewed referrals giving ``target``."""
    out = []
    for flagged in range(n + 1):
        for payment in (False, True):
            for velocity in (False, True):
                if payment and not flagged or velocity and n < VELOCITY_MIN:
                    continue
                if severity_of(flagged, payment, velocity) == target:
                    out.append((flagged, payment, velocity))
    return out


def _address(rng) -> dict[str, Any]:
    postcode, city = pick(rng, _CITIES)
    return {"number": int(rng.integers(1, 200)), "street": pick(rng, _STREETS), "apt": int(rng.integers(1, 40)),
            "postcode": postcode, "city": city}


def _format_address(rng, a: Mapping[str, Any], noise: int) -> str:
    """One written form of an address; higher noise varies case, spacing and punctuation."""
    parts = [f"{a['number']} {a['street']}", f"Apt {a['apt']}", f"{a['postcode']} {a['city']}"]
    if noise == 0 or rng.random() < 0.4:
        return ", ".join(parts)
    seps = (", ", " ", " - ", " ,", "; ")
    text = "".join(p + (pick(rng, seps) if i < len(parts) - 1 else "") for i, p in enumerate(parts))
    style = int(rng.integers(4))
    text = text.upper() if style == 0 else text.lower() if style == 1 else text
    if noise == 2 and rng.random() < 0.5:
        text = "  " + text.replace(" ", "  ", 1) + " "
    return text.replace("Apt ", "Apt. ") if rng.random() < 0.3 else text


def _same_place(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a[k] == b[k] for k in ("number", "street", "apt", "postcode", "city"))


def _stamp(rng, instant: datetime, noise: int) -> str:
    """An ISO timestamp of ``instant`` (UTC), written with a UTC offset at noise 2."""
    if noise == 2 and rng.random() < 0.5:
        hours = int(rng.choice([-5, -3, 1, 2, 3, 5, 8]))
        local = instant.astimezone(timezone(timedelta(hours=hours)))
        return local.isoformat(timespec="seconds")
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(rng, status: str, noise: int) -> str:
    if noise == 0 or rng.random() > 0.3 * noise:
        return status
    return pick(rng, (status.capitalize(), status.upper(), f" {status} ", f"{status.capitalize()} "))


def _indicator_sets(rng, n: int, flagged: int, payment: bool) -> list[set[str]]:
    """Indicators of each reviewed referral: ``flagged`` of them flagged, payment on some if asked."""
    order = rng.permutation(n).tolist()
    sets: list[set[str]] = [set() for _ in range(n)]
    flagged_idx = order[:flagged]
    pay_count = int(rng.integers(1, min(flagged, 2) + 1)) if payment else 0
    for rank, i in enumerate(flagged_idx):
        if rank < pay_count:
            extra = int(rng.integers(0, 3))
            sets[i] = {"shared_payment", *rng.choice(_SOFT, size=extra, replace=False).tolist()}
        else:
            sets[i] = set(rng.choice(_SOFT, size=int(rng.integers(2, 5)), replace=False).tolist())
    for i in order[flagged:]:
        if rng.random() < 0.55:
            sets[i] = {pick(rng, _SOFT)}
    return sets


def _creation_days(rng, n: int, velocity: bool) -> list[int]:
    """Days before the review date of each reviewed referral's creation: with velocity, 5 or more
    in the last 7 days (days 0-4), else at most 4; the others well inside the 90-day window."""
    recent = int(rng.integers(VELOCITY_MIN, n + 1)) if velocity else int(rng.integers(0, min(VELOCITY_MIN - 1, n) + 1))
    days = [int(rng.integers(0, 5)) for _ in range(recent)] + [int(rng.integers(9, WINDOW_DAYS - 2))
                                                               for _ in range(n - recent)]
    rng.shuffle(days)
    return days


class _Builder:
    """Writes the records of one world: accounts, activity records and referrals, from id pools."""

    def __init__(self, rng, noise: int, review_end: datetime, n: int):
        self.rng, self.noise, self.review_end = rng, noise, review_end
        self.referrer_id, *self.account_ids = ids(rng, "AC-", 1 + n + 6)
        self.home = _address(rng)
        devices = ids(rng, "dev_", 2 + 2 * n + 8, width=8)
        cards = ids(rng, "fp_", 2 + n + 8, width=8)
        self.referrer_devices, self.spare_devices = devices[:2], devices[2:]
        self.referrer_cards, self.spare_cards = cards[:2], cards[2:]
        self.referral_ids = ids(rng, "RF-", n + 6, width=5)
        self.accounts: dict[str, dict[str, Any]] = {}
        self.activity: dict[str, dict[str, Any]] = {}
        self.referrals: list[dict[str, Any]] = []

    def account(self, acc_id: str, opened_at: datetime, device_ids, card_fps, address: str, warnings: int) -> None:
        rng = self.rng
        first, last = pick(rng, _FIRST), pick(rng, _LAST)
        self.accounts[acc_id] = {
            "account_id": acc_id, "name": f"{first} {last}", "opened_at": _stamp(rng, opened_at, self.noise),
            "status": _status(rng, "active", self.noise), "segment": pick(rng, _SEGMENTS), "address": address,
            "device_ids": list(device_ids),
            "payment_methods": [{"type": pick(rng, ("card", "bank_account")), "fingerprint": fp} for fp in card_fps],
            "prior_warnings": warnings}

    def referral(self, rid: str, acc: str, created: datetime, status: str, bonus_status: str) -> None:
        self.referrals.append({"referral_id": rid, "referred_account_id": acc,
                               "created_at": _stamp(self.rng, created, self.noise),
                               "status": _status(self.rng, status, self.noise),
                               "bonus": {"amount": pick(self.rng, _BONUSES), "currency": "EUR",
                                         "status": bonus_status}})

    def device_owners(self, sets: list[set[str]]) -> dict[int, str]:
        """Shared-device referrals: some pairs share a fresh device, the rest use one of the referrer's."""
        with_device = [i for i in range(len(sets)) if "shared_device" in sets[i]]
        self.rng.shuffle(with_device)
        device_of: dict[int, str] = {}
        while len(with_device) >= 2 and self.rng.random() < 0.4:
            shared = self.spare_devices.pop()
            device_of[with_device.pop()] = device_of[with_device.pop()] = shared
        for i in with_device:
            device_of[i] = pick(self.rng, self.referrer_devices)
        return device_of

    def other_address(self) -> str:
        """An address that is not the referrer's (at noise 2 often only the apartment differs)."""
        home, rng = self.home, self.rng
        other = {**home, "apt": home["apt"] % 39 + 1} if self.noise == 2 and rng.random() < 0.4 else _address(rng)
        while _same_place(other, home):
            other = _address(rng)
        return _format_address(rng, other, self.noise)

    def reviewed(self, i: int, indicators: set[str], days_back: int, device: str | None) -> None:
        """Reviewed referral ``i`` and its account, realising exactly ``indicators``."""
        rng, noise = self.rng, self.noise
        created = self.review_end + timedelta(days=-days_back, minutes=int(rng.integers(30, 23 * 60)),
                                              seconds=int(rng.integers(60)))
        if "rapid_signup" in indicators:
            minutes = float(rng.uniform(1, 8.5))
        else:  # at least 15 minutes, and never after the end of the review date
            room = (self.review_end + timedelta(days=1) - created).total_seconds() / 60 - 1
            minutes = float(rng.uniform(15, min(6 * 24 * 60, room)))
        acc = self.account_ids[i]
        cards = [self.spare_cards.pop()] + ([pick(rng, self.referrer_cards)] if "shared_payment" in indicators else [])
        address = _format_address(rng, self.home, noise) if "shared_address" in indicators else self.other_address()
        self.account(acc, created + timedelta(minutes=minutes), [device or self.spare_devices.pop()], cards, address, 0)
        self.activity[acc] = _activity(rng, acc, "low_activity" in indicators, noise)
        status = "completed" if rng.random() < 0.75 else "pending"
        bonus = "paid" if status == "completed" else "pending"
        if status == "completed" and noise and rng.random() < 0.15:
            bonus = "withheld"
        self.referral(self.referral_ids[i], acc, created, status, bonus)

    def ignored(self, slot: int, n: int) -> None:
        """A cancelled referral in the window or an old one outside it; its account may share a
        device with a reviewed referral's account, which must not count."""
        rng = self.rng
        acc, rid = self.account_ids[slot], self.referral_ids[slot]
        cancelled = rng.random() < 0.5
        back = int(rng.integers(1, WINDOW_DAYS - 2)) if cancelled else int(rng.integers(WINDOW_DAYS + 6, 400))
        created = self.review_end + timedelta(days=-back, minutes=int(rng.integers(30, 23 * 60)))
        lure = self.accounts[self.account_ids[int(rng.integers(n))]]["device_ids"][0] if rng.random() < 0.5 \
            else self.spare_devices.pop()
        address = _format_address(rng, self.home if rng.random() < 0.3 else _address(rng), self.noise)
        self.account(acc, created + timedelta(minutes=float(rng.uniform(1, 300))), [lure], [self.spare_cards.pop()],
                     address, 0)
        self.activity[acc] = _activity(rng, acc, bool(rng.random() < 0.5), self.noise)
        self.referral(rid, acc, created, "cancelled" if cancelled else "completed", "withheld" if cancelled else "paid")


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One task's world (module docstring); ``difficulty`` holds ``noise`` and ``referrals``."""
    noise, most = int(difficulty["noise"]), int(difficulty["referrals"])
    review = _BASE_DAY + timedelta(days=int(rng.integers(120, 480)))
    review_end = datetime(review.year, review.month, review.day, tzinfo=timezone.utc)
    target = pick(rng, SEVERITIES)
    warned = bool(rng.random() < 0.5)
    while True:
        n = int(rng.integers(2, most + 1))
        combos = _combos(n, target)
        if combos:
            break
    flagged, payment, velocity = pick(rng, combos)
    sets = _indicator_sets(rng, n, flagged, payment)
    days = _creation_days(rng, n, velocity)
    b = _Builder(rng, noise, review_end, n)
    b.account(b.referrer_id, review_end - timedelta(days=int(rng.integers(200, 900))), b.referrer_devices,
              b.referrer_cards, _format_address(rng, b.home, noise), int(rng.integers(1, 4)) if warned else 0)
    device_of = b.device_owners(sets)
    for i in range(n):
        b.reviewed(i, sets[i], days[i], device_of.get(i))
    for k in range(int(rng.integers(0, 2 + 2 * noise)) if noise else 0):
        b.ignored(n + k, n)
    order = rng.permutation(len(b.referrals)).tolist()
    return {"review_date": review.isoformat(), "referrer_id": b.referrer_id, "accounts": b.accounts,
            "activity": b.activity, "referrals": {b.referrer_id: [b.referrals[i] for i in order]},
            "case_id": f"RAC-{int(rng.integers(100000, 999999))}", "cases": [],
            "plan": {"severity": target, "prior_warning": warned, "flagged": flagged, "payment": payment,
                     "velocity": velocity, "reviewed": n,
                     "indicators": {b.referral_ids[i]: sorted(sets[i]) for i in range(n)}}}


def _activity(rng, acc: str, low: bool, noise: int) -> dict[str, Any]:
    """The activity record of an account; with noise, a low-activity account may have no count
    (null) or no record at all (``{"unavailable": True}``: the tool answers with an error)."""
    if low and noise and rng.random() < 0.35:
        return {"unavailable": True} if rng.random() < 0.5 else {
            "account_id": acc, "transactions_first_30_days": None, "balance_band": "unknown"}
    count = int(rng.integers(0, LOW_ACTIVITY_BELOW)) if low else int(rng.integers(LOW_ACTIVITY_BELOW, 45))
    band = "low" if count < 5 else "medium" if count < 20 else "high"
    return {"account_id": acc, "transactions_first_30_days": count, "balance_band": band}
