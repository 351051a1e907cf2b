"""World generator of the DangerousGoods domain: one outbound shipment, its products' SDSs and lab reports.

The generator draws the *outcome first* — the governing product's hazard class uniformly,
then a score vector of that class, then scores for the other products that do not
outrank it — and then writes raw records (flash points, LD50 values, reactivity codes,
manifest quantities) that produce those scores under SOP DG-04, in units and places that
depend on the ``noise`` knob. Values are kept away from threshold boundaries so that unit
conversions cannot flip a score. The plan is kept under ``world["plan"]`` (never shown by
a tool) so tests can check the reference procedure recovers it from the raw records.

Noise levels: 0 — one SDS revision with every value in canonical units, a lab report that
agrees with it, clean codes. 1 — Fahrenheit, g/kg, g and lb; values missing from the SDS
but present in the lab report (and lab values that override a different SDS value);
data gaps; superseded SDS revisions; manifest codes in other letter case or with spaces;
non-dangerous lines. 2 — more of each, revisions out of date order, messier text.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

import numpy as np

__all__ = ["DEFAULT_DIFFICULTY", "DIFFICULTY_LIMITS", "MAX_PRODUCTS", "generate_world", "hazard_class", "CLASSES",
           "GAP_DEFAULTS", "SEVERITY"]

CLASSES = ("Class A", "Class B", "Class C", "Class D")
#: Severity rank of each class (higher is more severe).
SEVERITY = {"Class A": 3, "Class B": 2, "Class C": 1, "Class D": 0}
#: Score given to a check whose data is missing (SOP section 3); quantity never has gaps.
GAP_DEFAULTS = {"flash_point": 2, "ld50": 2, "reactivity": 1}
#: Largest value of the ``products`` difficulty knob.
MAX_PRODUCTS = 4
DEFAULT_DIFFICULTY: dict[str, Any] = {"noise": 1, "distractors": True, "products": 2}
#: Inclusive ranges of the integer knobs (checked on every override).
DIFFICULTY_LIMITS: dict[str, tuple[int, int]] = {"products": (1, MAX_PRODUCTS)}
_CHECK_OF_GAP = {"flash_point": 0, "ld50": 1, "reactivity": 2}
#: Per noise level: probability that a check of a product is a data gap.
_GAP_P = (0.0, 0.18, 0.3)

# Values inside each score band, away from the boundaries (so rounding after unit
# conversion never changes the band).
_FLASH_C = {3: (-30, 20), 2: (26, 57), 1: (63, 90), 0: (97, 240)}
_LD50 = {3: (2, 45), 2: (60, 280), 1: (340, 1900), 0: (2300, 9000)}
_QTY_KG = {0: (0.5, 9.0), 1: (12.0, 90.0), 2: (120.0, 900.0), 3: (1150.0, 9000.0)}
LB_KG = 0.45359237

_NAMES = ("Industrial degreaser", "Epoxy hardener", "Solvent cleaner", "Lithium battery pack", "Paint thinner",
          "Pool chlorinator", "Wood stain", "Adhesive primer", "Rust converter", "Drain opener", "Etching acid",
          "Brake fluid", "Aerosol lubricant", "Fuel additive", "Disinfectant concentrate", "Resin catalyst",
          "Printing ink", "Floor sealant", "Pesticide emulsion", "Photographic developer", "Welding flux",
          "Descaling agent", "Antifreeze blend", "Oxidising bleach", "Marine varnish", "Refrigerant oil")
_SHIPPERS = ("Northwind Chemicals", "Baltic Coatings", "Helix Industrial", "Meridian Supply", "Orion Labs",
             "Cobalt & Finch", "Tern Valley Agro", "Redstone Maintenance")
_CITIES = ("Rotterdam", "Hamburg", "Antwerp", "Gdansk", "Lyon", "Milan", "Porto", "Vienna", "Oslo", "Tallinn")
_MODES = ("road", "rail", "sea", "air")
_APPEARANCE = ("clear liquid", "amber liquid", "white powder", "grey paste", "colourless gas", "blue gel")
_PACKAGING = ("drum", "jerrican", "IBC", "carton", "bag", "cylinder")
_FILLER = ("Stretch wrap", "Pallet spacers", "Shipping documents", "Dunnage bags")
_BASE_DAY = date(2024, 1, 1)


def hazard_class(scores: tuple[int, int, int, int]) -> str:
    """SOP section 4: the class of ``(flammability, toxicity, reactivity, quantity)`` scores."""
    f, t, _, _ = scores
    total = sum(scores)
    cls = "Class A" if total >= 9 else "Class B" if total >= 6 else "Class C" if total >= 3 else "Class D"
    if max(scores) == 3 and cls in ("Class C", "Class D"):
        cls = "Class B"
    if t == 3 and f >= 2:
        cls = "Class A"
    return cls


_VECTORS = [tuple(v) for v in itertools.product(range(4), repeat=4)]
_KEY = {v: (SEVERITY[hazard_class(v)], sum(v)) for v in _VECTORS}


@functools.lru_cache(maxsize=None)
def _options(gaps: tuple[str, ...], target: str | None, ceiling: tuple[int, int] | None) -> tuple:
    """Score vectors whose gap checks hold their defaults and whose class is ``target``
    (or whose (severity, total) key is at most ``ceiling``), in a fixed order."""
    fixed = {_CHECK_OF_GAP[g]: GAP_DEFAULTS[g] for g in gaps}
    return tuple(v for v in _VECTORS if all(v[i] == s for i, s in fixed.items())
                 and (target is None or hazard_class(v) == target) and (ceiling is None or _KEY[v] <= ceiling))


def _choose_vector(rng, gaps: set[str], target: str | None = None, ceiling: tuple[int, int] | None = None
                   ) -> tuple[int, int, int, int] | None:
    options = _options(tuple(sorted(gaps)), target, ceiling)
    return options[int(rng.integers(len(options)))] if options else None


def _draw_gaps(rng, noise: int) -> set[str]:
    return {g for g in GAP_DEFAULTS if rng.random() < _GAP_P[noise]}


def _messy(rng, text: str, noise: int) -> str:
    """Free text with inconsistent case and whitespace at higher noise."""
    if noise == 0 or rng.random() > 0.35 * noise:
        return text
    kind = int(rng.integers(3))
    return text.upper() if kind == 0 else text.lower() if kind == 1 else f"  {text} "


def _code_variant(rng, code: str, noise: int) -> str:
    if noise == 0 or rng.random() > 0.3 * noise:
        return code
    kind = int(rng.integers(3))
    return code.lower() if kind == 0 else f" {code} " if kind == 1 else f"{code.lower()}  "


def _flash_record(rng, score: int, noise: int) -> dict[str, Any]:
    low, high = _FLASH_C[score]
    celsius = int(rng.integers(low, high + 1))
    if noise and rng.random() < 0.35:
        return {"value": round(celsius * 9 / 5 + 32, 1), "unit": "F"}
    return {"value": celsius, "unit": "C"}


def _ld50_record(rng, score: int, noise: int) -> dict[str, Any]:
    low, high = _LD50[score]
    mg = int(rng.integers(low, high + 1))
    if noise and rng.random() < 0.35:
        return {"value": mg / 1000, "unit": "g/kg"}
    return {"value": mg, "unit": "mg/kg"}


def _other_score(rng, score: int) -> int:
    return int(rng.choice([s for s in range(4) if s != score]))


def _source(rng, noise: int, has_lab: bool) -> str:
    """Where a value that the lab may measure is written: ``both`` (noise 0), ``sds``, ``lab``,
    or ``lab_overrides`` (the lab's value, and a different one on the SDS)."""
    if noise == 0:
        return "both"
    where = ("sds", "lab", "lab_overrides")[int(rng.choice(3, p=[0.5, 0.25, 0.25]))]
    return "sds" if where != "sds" and not has_lab else where


def _revisions(rng, latest: dict[str, Any], noise: int, today: date) -> list[dict[str, Any]]:
    """The SDS revisions: ``latest`` plus, with noise, superseded ones with other values
    (listed out of date order at noise 2)."""
    revision_day = today - timedelta(days=int(rng.integers(30, 900)))
    revisions = [{"revision": 1, "revision_date": revision_day.isoformat(), **latest}]
    for k in range(int(rng.integers(0, 1 + noise)) if noise else 0):
        older = revision_day - timedelta(days=int(rng.integers(200, 1500)) * (k + 1))
        stale = {"flash_point": _flash_record(rng, int(rng.integers(4)), noise),
                 "ld50_oral": _ld50_record(rng, int(rng.integers(4)), noise),
                 "reactivity_code": f"R{int(rng.integers(4))}"}
        revisions.append({"revision": 0, "revision_date": older.isoformat(), **stale})
    revisions.sort(key=lambda rev: rev["revision_date"])
    for i, rev in enumerate(revisions, start=1):
        rev["revision"] = i
    if noise == 2:
        rng.shuffle(revisions)
    for rev in revisions:
        rev["appearance"] = _APPEARANCE[int(rng.integers(len(_APPEARANCE)))]
    return revisions


def _product_records(rng, code: str, scores, gaps: set[str], noise: int, today: date) -> tuple[dict, dict | None]:
    """The SDS (with revisions) and the lab report (or None) realising ``scores`` and ``gaps``."""
    f, t, r, _ = scores
    latest = {"flash_point": None, "ld50_oral": None, "reactivity_code": None}
    lab: dict[str, Any] = {"measured_flash_point": None, "reactivity_code": None}
    has_lab = noise == 0 or rng.random() < 0.75
    # Flammability: the lab value wins when present.
    if "flash_point" not in gaps:
        where = _source(rng, noise, has_lab)
        if where in ("sds", "both"):
            latest["flash_point"] = _flash_record(rng, f, noise)
        if where == "both":
            lab["measured_flash_point"] = dict(latest["flash_point"])
        if where in ("lab", "lab_overrides"):
            lab["measured_flash_point"] = _flash_record(rng, f, noise)
        if where == "lab_overrides":
            latest["flash_point"] = _flash_record(rng, _other_score(rng, f), noise)
    if "ld50" not in gaps:
        latest["ld50_oral"] = _ld50_record(rng, t, noise)
    # Reactivity: the lab code wins when present.
    if "reactivity" not in gaps:
        reactivity = f"R{r}"
        where = _source(rng, noise, has_lab)
        if where in ("sds", "both"):
            latest["reactivity_code"] = reactivity
        if where in ("lab", "both", "lab_overrides"):
            lab["reactivity_code"] = reactivity
        if where == "lab_overrides":
            latest["reactivity_code"] = f"R{_other_score(rng, r)}"
        if noise == 2 and rng.random() < 0.3:
            latest["reactivity_code"] = latest["reactivity_code"] and latest["reactivity_code"].lower()
    sds = {"product_code": code, "revisions": _revisions(rng, latest, noise, today)}
    if not has_lab:
        return sds, None
    tested = today - timedelta(days=int(rng.integers(5, 400)))
    return sds, {"report_id": f"LR-{int(rng.integers(10000, 99999))}", "product_code": code,
                 "tested_on": tested.isoformat(), **lab}


def _quantity_lines(rng, score: int, noise: int) -> list[dict[str, Any]]:
    low, high = _QTY_KG[score]
    total = float(rng.uniform(low, high))
    n = 1 if noise == 0 else int(rng.integers(1, 2 + noise))
    shares = rng.dirichlet(np.ones(n)) if n > 1 else np.ones(1)
    lines = []
    for share in shares:
        kg = max(total * float(share), 0.05)
        unit = "kg" if noise == 0 else ("kg", "g", "lb")[int(rng.choice(3, p=[0.5, 0.2, 0.3]))]
        value = kg if unit == "kg" else kg * 1000 if unit == "g" else kg / LB_KG
        lines.append({"value": round(value, 2), "unit": unit})
    return lines


def _plan(rng, target: str, n_products: int, noise: int) -> list[tuple[tuple[int, int, int, int], set[str]]]:
    """(scores, gaps) per product: the first of class ``target``, the others not outranking it."""
    while True:
        gov_gaps = _draw_gaps(rng, noise)
        gov = _choose_vector(rng, gov_gaps, target=target)
        if gov is not None:
            break
    plan = [(gov, gov_gaps)]
    for _ in range(n_products - 1):
        gaps = _draw_gaps(rng, noise)
        vec = _choose_vector(rng, gaps, ceiling=_KEY[gov])
        if vec is None:
            gaps, vec = set(), gov
        plan.append((vec, gaps))
    return plan


def _shuffle_lines(rng, lines: list[dict[str, Any]], noise: int) -> list[dict[str, Any]]:
    """With noise, lines of several products interleave and non-dangerous lines are mixed in; numbered."""
    if noise:
        rest = lines[1:]
        rng.shuffle(rest)
        lines = lines[:1] + rest
        for _ in range(int(rng.integers(0, 1 + 2 * noise))):
            pos = int(rng.integers(len(lines) + 1))
            lines.insert(pos, {"product_code": f"PKG-{int(rng.integers(100, 999))}",
                               "description": _FILLER[int(rng.integers(len(_FILLER)))],
                               "un_number": None if rng.random() < 0.7 else "",
                               "quantity": {"value": round(float(rng.uniform(1, 60)), 2), "unit": "kg"},
                               "packaging": "carton"})
    for i, line in enumerate(lines, start=1):
        line["line"] = i
    return lines


def generate_world(rng: np.random.Generator, difficulty: Mapping[str, Any]) -> dict[str, Any]:
    """One task's world (module docstring); ``difficulty`` holds ``noise`` and ``products``."""
    noise, n_products = int(difficulty["noise"]), int(difficulty["products"])
    today = _BASE_DAY + timedelta(days=int(rng.integers(0, 365)))
    target = CLASSES[int(rng.integers(len(CLASSES)))]
    plan = _plan(rng, target, n_products, noise)
    order = rng.permutation(n_products).tolist()
    codes: list[str] = []
    while len(codes) < n_products:
        code = f"PRD-{int(rng.integers(10000, 100000))}"
        if code not in codes:
            codes.append(code)
    names = rng.choice(len(_NAMES), size=n_products, replace=False).tolist()
    sds, labs, lines = {}, {}, []
    for slot, k in enumerate(order):
        vec, gaps = plan[k]
        code = codes[slot]
        sheet, lab = _product_records(rng, code, vec, gaps, noise, today)
        sheet.update(product_name=_messy(rng, _NAMES[names[slot]], noise), un_number=f"UN{int(rng.integers(1000, 3600))}")
        sds[code] = sheet
        if lab is not None:
            labs[code] = lab
        packaging = _PACKAGING[int(rng.integers(len(_PACKAGING)))]
        for qty in _quantity_lines(rng, vec[3], noise):
            lines.append({"product_code": _code_variant(rng, code, noise), "description": sheet["product_name"],
                          "un_number": sheet["un_number"], "quantity": qty, "packaging": packaging})
    lines = _shuffle_lines(rng, lines, noise)
    origin, destination = rng.choice(len(_CITIES), size=2, replace=False).tolist()
    shipment = {"shipment_id": f"SHP-{int(rng.integers(100000, 999999))}",
                "shipper": _messy(rng, _SHIPPERS[int(rng.integers(len(_SHIPPERS)))], noise),
                "origin": _CITIES[origin], "destination": _CITIES[destination],
                "mode": _MODES[int(rng.integers(len(_MODES)))], "ship_date": today.isoformat(),
                "lines": [{k: line[k] for k in ("line", "product_code", "description", "un_number", "quantity",
                                                "packaging")} for line in lines]}
    return {"shipment": shipment, "sds": sds, "lab_reports": labs,
            "classification_id": f"HZC-{int(rng.integers(100000, 999999))}", "filings": [],
            "plan": {"class": target, "products": [{"code": codes[slot], "scores": list(plan[k][0]),
                                                    "gaps": sorted(plan[k][1])} for slot, k in enumerate(order)]}}
