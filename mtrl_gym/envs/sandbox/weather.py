"""``mtrl/Sandbox-Weather-v0``: read-only tools answered from a recorded cassette.

The worked example of the *read-only* pattern. A small weather archive (13 European
cities, 2024-06-01 to 2024-06-14) stands in for a real API: :func:`archive_observation`
is the "real" service, and ``data/weather.cassette.jsonl`` is its recording, made with
:func:`record_cassette` (``python -m mtrl_gym.envs.sandbox.weather data/weather.cassette.jsonl``).
The environment replays the cassette, so it runs offline and every episode is reproducible;
a test re-records it and checks the shipped file is identical.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping
from datetime import date, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from mtrl_gym.envs.sandbox.canonical import canonical_json
from mtrl_gym.envs.sandbox.cassette import Cassette
from mtrl_gym.envs.sandbox.env import ToolSandboxEnv
from mtrl_gym.envs.sandbox.tools import ToolError, ToolSet, tool
from mtrl_gym.error import ConfigError

__all__ = ["WeatherEnv", "CITIES", "DATES", "archive_observation", "list_cities", "get_daily_weather",
           "record_cassette", "CASSETTE_PATH"]

#: (city, ISO country code, typical June maximum in degrees C, share of rainy days).
CITIES: tuple[tuple[str, str, float, float], ...] = (
    ("Oslo", "NO", 20.0, 0.40), ("Bergen", "NO", 16.0, 0.65), ("Stockholm", "SE", 20.5, 0.35),
    ("Copenhagen", "DK", 19.5, 0.40), ("Helsinki", "FI", 19.0, 0.35), ("Reykjavik", "IS", 12.5, 0.50),
    ("Paris", "FR", 23.5, 0.35), ("Lyon", "FR", 25.5, 0.35), ("Madrid", "ES", 30.0, 0.10),
    ("Rome", "IT", 28.5, 0.15), ("Berlin", "DE", 23.0, 0.40), ("Vienna", "AT", 24.5, 0.40),
    ("Zürich", "CH", 22.5, 0.50),
)
FIRST_DAY = date(2024, 6, 1)
#: The days the archive covers, ISO format.
DATES: tuple[str, ...] = tuple((FIRST_DAY + timedelta(days=i)).isoformat() for i in range(14))
CASSETTE_PATH = "data/weather.cassette.jsonl"
_BY_NAME = {c[0].casefold(): c for c in CITIES}


def _unit(*parts: str) -> float:
    """A deterministic number in [0, 1) from text (same in every process)."""
    h = hashlib.blake2b("|".join(parts).encode(), digest_size=8, key=b"mtrl_gym-weather").digest()
    return int.from_bytes(h, "big") / 2 ** 64


def archive_observation(city: str, day: str) -> dict[str, Any]:
    """The archive's record for ``city`` on ``day`` (the "real" service behind the cassette)."""
    name, country, base, wet = _BY_NAME[city.strip().casefold()]
    t_max = round(base + 8 * _unit(name, day, "tmax") - 4, 1)
    t_min = round(t_max - 6 - 5 * _unit(name, day, "tmin"), 1)
    rainy = _unit(name, day, "rain?") < wet
    precip = round(0.2 + 17.8 * _unit(name, day, "mm") ** 2, 1) if rainy else 0.0
    conditions = ("heavy rain" if precip >= 10 else "rain" if precip >= 2 else "showers" if rainy
                  else "sunny" if _unit(name, day, "sky") < 0.6 else "cloudy")
    return {"city": name, "country": country, "date": day, "temp_max_c": t_max, "temp_min_c": t_min,
            "precip_mm": precip, "conditions": conditions}


def _norm_city(args: dict[str, Any]) -> dict[str, Any]:
    return {**args, "city": args["city"].strip().casefold(), "date": args["date"].strip()}


def _norm_country(args: dict[str, Any]) -> dict[str, Any]:
    return {**args, "country": args["country"].strip().upper() if isinstance(args.get("country"), str) else None}


@tool(recorded=True, normalize=_norm_country)
def list_cities(country: str | None = None) -> list[dict[str, str]]:
    """List the cities the weather archive covers.

    Args:
        country: Two-letter ISO country code (e.g. "NO") to filter by; omit for all cities.
    """
    code = country.strip().upper() if country else None
    return [{"city": c[0], "country": c[1]} for c in CITIES if code is None or c[1] == code]


@tool(recorded=True, normalize=_norm_city)
def get_daily_weather(city: str, date: str) -> dict[str, Any]:  # noqa: A002 - the API's parameter name
    """Daily weather observed in a city: maximum/minimum temperature, precipitation, conditions.

    Args:
        city: City name as listed by list_cities, e.g. "Oslo".
        date: Day in ISO format YYYY-MM-DD; the archive covers 2024-06-01 to 2024-06-14.
    """
    if city.strip().casefold() not in _BY_NAME:
        raise ToolError(f"unknown city {city!r}; call list_cities to see the cities covered")
    if date.strip() not in DATES:
        raise ToolError(f"no observations for {date!r}; the archive covers {DATES[0]} to {DATES[-1]}")
    return archive_observation(city, date.strip())


TOOLS = ToolSet([list_cities, get_daily_weather])


def record_cassette(path: str | os.PathLike) -> Path:
    """Record every call the archive answers (all cities and days, every country filter) to ``path``."""
    target = Path(path)
    if target.exists():
        target.unlink()
    cassette = Cassette(target, mode="record", tools=TOOLS.schemas,
                        metadata={"source": "mtrl_gym.envs.sandbox.weather.archive_observation"})
    cassette.add(list_cities, {"country": None}, list_cities())
    for code in sorted({c[1] for c in CITIES}):
        cassette.add(list_cities, {"country": code}, list_cities(code))
    for name, *_ in CITIES:
        for day in DATES:
            cassette.add(get_daily_weather, {"city": name, "date": day}, get_daily_weather(name, day))
    return cassette.save()


def _task_id(kind: str, params: Mapping[str, Any]) -> str:
    digest = hashlib.blake2b(canonical_json(dict(params)).encode(), digest_size=5, key=b"mtrl_gym").hexdigest()
    return f"weather-{kind}-{digest}"


def sample_weather_task(rng) -> dict[str, Any]:
    """A question answerable from the archive, its expected answer and checker."""
    kind = ("warmest", "rain_total", "difference")[int(rng.integers(3))]
    names = [c[0] for c in CITIES]
    if kind == "warmest":
        while True:
            picked = [names[i] for i in rng.choice(len(names), size=3, replace=False)]
            day = DATES[int(rng.integers(len(DATES)))]
            temps = [archive_observation(c, day)["temp_max_c"] for c in picked]
            if len(set(temps)) == 3:
                break
        answer = picked[temps.index(max(temps))]
        prompt = (f"Which of {picked[0]}, {picked[1]} and {picked[2]} had the highest maximum temperature on "
                  f"{day}? Answer with the city name.")
        params: dict[str, Any] = {"cities": picked, "date": day}
        checker: dict[str, Any] = {"type": "exact", "ignore_case": True}
    elif kind == "rain_total":
        city = names[int(rng.integers(len(names)))]
        start = int(rng.integers(len(DATES) - 2))
        days = DATES[start:start + 3]
        answer = round(sum(archive_observation(city, d)["precip_mm"] for d in days), 1)
        prompt = (f"How many millimetres of precipitation fell in {city} from {days[0]} to {days[-1]} "
                  "(both days included) in total? Answer with a number.")
        params, checker = {"city": city, "days": list(days)}, {"type": "number", "abs_tol": 0.05}
    else:
        a, b = (names[i] for i in rng.choice(len(names), size=2, replace=False))
        day = DATES[int(rng.integers(len(DATES)))]
        answer = round(archive_observation(a, day)["temp_max_c"] - archive_observation(b, day)["temp_max_c"], 1)
        prompt = (f"On {day}, how many degrees Celsius warmer was the maximum temperature in {a} than in {b}? "
                  "Answer with a number (negative if it was colder).")
        params, checker = {"a": a, "b": b, "date": day}, {"type": "number", "abs_tol": 0.05}
    return {"id": _task_id(kind, params), "prompt": prompt, "answer": answer, "checker": checker, "kind": kind}


class WeatherEnv(ToolSandboxEnv):
    """Answer questions about past weather with read-only tools replayed from a cassette.

    ## Description
    The *read-only* sandbox pattern. Tools ``list_cities(country=None)`` and
    ``get_daily_weather(city, date)`` are answered from ``data/weather.cassette.jsonl``
    (a recording of :func:`archive_observation`); nothing runs live, so episodes are
    reproducible and need no network. City names match case-insensitively (the tool's
    ``normalize``). Questions: the warmest of three cities on a day, a three-day rain total,
    or a temperature difference between two cities.

    ## Action Space, Action Format, Observation Space, Invalid Actions, Episode End
    As :class:`~mtrl_gym.envs.sandbox.env.ToolSandboxEnv`. A call outside the recording
    (a city or day the archive lacks) gets the tool result "get_daily_weather is not
    available for these arguments ..." (``status="not_available"``).

    ## Starting State
    A question drawn with ``self.np_random`` (:func:`sample_weather_task`), or
    ``options={"task": row}``; rows have ``prompt``, ``answer``, ``checker`` and ``id``.

    ## Rewards
    1.0 for a correct final answer (city name case-insensitive; numbers within 0.05), else 0.

    ## Information
    As the base class; rows also carry ``kind`` (``warmest``, ``rain_total``, ``difference``).

    ## Arguments
    ``gymnasium.make("mtrl/Sandbox-Weather-v0", on_missing="error", max_tool_calls=20)``;
    every :class:`~mtrl_gym.envs.sandbox.env.ToolSandboxEnv` argument applies (``cassette=``
    replays another recording of the same tools).

    ## Version History
    - v0: initial version.
    """

    tools = TOOLS
    domain_prompt = ("You answer questions about past weather using a weather archive. Look the data up with "
                     "the tools; never guess values. Temperatures are in degrees Celsius, precipitation in "
                     "millimetres.")
    task_fields = ("prompt", "answer")

    def __init__(self, **kwargs: Any):
        mode = kwargs.get("mode") or "replay"
        if mode in ("record", "replay_or_record") and "cassette" not in kwargs:
            raise ConfigError(f"mode={mode!r} needs cassette=PATH to record into; the shipped cassette is "
                              "read-only (re-record it with record_cassette)")
        if mode != "live" and "cassette" not in kwargs:
            kwargs["cassette"] = str(resources.files("mtrl_gym.envs.sandbox").joinpath(CASSETTE_PATH))
        super().__init__(**kwargs)

    def sample_task(self, rng) -> dict[str, Any]:
        return sample_weather_task(rng)


if __name__ == "__main__":  # pragma: no cover - regenerates the shipped cassette
    default = Path(__file__).with_name("data") / "weather.cassette.jsonl"
    out = record_cassette(sys.argv[1] if len(sys.argv) > 1 else default)
    print(f"wrote {out}")
