"""Cassettes: canonical matching, modes, missing-call policies, file format errors, redaction."""

from __future__ import annotations

import json

import pytest

from mtrl_gym.envs.sandbox import (Cassette, Redactor, ToolError, ToolResponse, argument_distance, call_key,
                                   canonical_json, tool)
from mtrl_gym.envs.sandbox.cassette import FORMAT, VERSION
from mtrl_gym.error import CassetteError


@tool(recorded=True, normalize=lambda a: {**a, "city": a["city"].strip().casefold()})
def weather(city: str, days: int = 1) -> dict:
    """Weather for a city."""
    return {"city": city.title(), "days": days}


def live(value):
    calls = []

    def fn():
        calls.append(1)
        if isinstance(value, Exception):
            raise value
        return value

    fn.calls = calls
    return fn


# ----------------------------------------------------------------------------- canonical


@pytest.mark.parametrize("a, b", [
    ({"b": 1, "a": 2}, {"a": 2, "b": 1}),
    ({"x": 1}, {"x": 1.0}),
    ({"x": 100}, {"x": 1e2}),
    ({"x": 0.1}, {"x": 0.10}),
    ({"x": -0.0}, {"x": 0}),
    ({"x": [1, {"z": 2, "y": 3}]}, {"x": (1.0, {"y": 3, "z": 2})}),
    ({"x": "caf\u00e9"}, {"x": "cafe\u0301"}),
])
def test_equal_arguments_have_one_canonical_form(a, b):
    assert canonical_json(a) == canonical_json(b)


@pytest.mark.parametrize("a, b", [({"x": "a"}, {"x": "A"}), ({"x": " a"}, {"x": "a"}), ({"x": 1}, {"x": "1"}),
                                  ({"x": True}, {"x": 1}), ({"x": [1, 2]}, {"x": [2, 1]})])
def test_different_arguments_stay_different(a, b):
    assert canonical_json(a) != canonical_json(b)


def test_json_whitespace_in_model_text_does_not_matter():
    a = json.loads('{ "days" : 2 ,\n "city":"Oslo" }')
    assert call_key("weather", a) == 'weather{"city":"Oslo","days":2}'
    assert call_key("weather", a) == call_key("weather", {"city": "Oslo", "days": 2.0})


def test_argument_distance():
    assert argument_distance({"a": "Oslo"}, {"a": "Oslo"}) == 0
    assert argument_distance({"a": "Oslo"}, {"a": "Olso"}) < argument_distance({"a": "Oslo"}, {"a": "Rome"})
    assert argument_distance({"n": 10}, {"n": 11}) == pytest.approx(1 / 11)
    assert argument_distance({"a": 1}, {"b": 1}) == 2.0


# --------------------------------------------------------------------------------- modes


def test_record_then_replay_from_file(tmp_path):
    path = tmp_path / "c.jsonl"
    rec = Cassette(path, mode="record")
    out = rec.call(weather, {"city": " OSLO ", "days": 2}, live=live({"t": 1.5}))
    assert (out.value, out.source) == ({"t": 1.5}, "live")
    rec.call(weather, {"city": "Rome", "days": 1}, live=live(ToolError("no data for Rome")))
    rec.save()
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["format"] == FORMAT and json.loads(lines[0])["version"] == VERSION
    entry = json.loads(lines[1])
    assert entry["tool"] == "weather" and entry["arguments"] == {"city": "oslo", "days": 2}
    assert entry["response"] == {"t": 1.5} and entry["latency_ms"] >= 0
    assert json.loads(lines[2])["error"] == "no data for Rome"

    rep = Cassette(path)  # replay by default
    never = live("must not run")
    out = rep.call(weather, {"days": 2.0, "city": "oslo"}, live=never)
    assert (out.value, out.error, out.source) == ({"t": 1.5}, None, "cassette") and never.calls == []
    out = rep.call(weather, {"city": "rome", "days": 1}, live=never)
    assert (out.value, out.error) == (None, "no data for Rome")
    out = rep.call(weather, {"city": "Paris", "days": 1}, live=never)
    assert out.source == "missing" and never.calls == []
    assert out.error == ("weather is not available for these arguments in this sandbox (no recorded response). "
                         "Check the arguments or use another tool.")


def test_record_mode_always_calls_and_replaces(tmp_path):
    c = Cassette(tmp_path / "c.jsonl", mode="record")
    c.call("f", {"x": 1}, live=live(1))
    fn = live(2)
    assert c.call("f", {"x": 1}, live=fn).value == 2 and fn.calls == [1] and len(c) == 1
    assert c.lookup("f", {"x": 1}).response == 2


def test_replay_or_record_records_only_misses():
    c = Cassette(mode="replay_or_record")
    first = live("a")
    c.call("f", {"x": 1}, live=first)
    second = live("b")
    assert c.call("f", {"x": 1.0}, live=second).value == "a" and second.calls == []
    assert c.call("f", {"x": 2}, live=second).value == "b" and second.calls == [1]
    assert c.dirty


def test_tool_response_metadata_is_recorded():
    c = Cassette(mode="record")
    out = c.call("f", {}, live=live(ToolResponse({"ok": True}, metadata={"status": 200})))
    assert out.value == {"ok": True} and out.interaction.metadata == {"status": 200}


def test_non_json_responses_are_rejected_when_recording():
    c = Cassette(mode="record")
    with pytest.raises(TypeError, match=r"the response of tool 'f' is not JSON \(set is not a JSON value\)"):
        c.call("f", {}, live=live({1, 2}))


def test_nearest_policy_serves_the_closest_recording_deterministically():
    c = Cassette(mode="replay_or_record", on_missing="nearest")
    for city in ("oslo", "rome", "bergen"):
        c.call(weather, {"city": city, "days": 1}, live=live(city))
    c.mode = "replay"
    out = c.call(weather, {"city": "Olso", "days": 1})
    assert (out.value, out.source) == ("oslo", "nearest")
    assert c.call(weather, {"city": "bregen", "days": 2}).value == "bergen"
    assert c.call("other", {"q": 1}).source == "missing"  # no recording of that tool at all


def test_strict_policy_message_is_pinned(tmp_path):
    path = tmp_path / "w.jsonl"
    rec = Cassette(path, mode="record")
    for city in ("oslo", "rome", "bergen", "paris"):
        rec.call(weather, {"city": city, "days": 1}, live=live(city))
    rec.save()
    strict = Cassette(path, on_missing="strict")
    with pytest.raises(CassetteError) as e:
        strict.call(weather, {"city": "Oslo ", "days": 3})
    assert str(e.value) == (
        f'{path}: no recorded response for weather{{"city":"oslo","days":3}} in replay mode (on_missing=\'strict\'). '
        'Closest recorded calls of weather: weather{"city":"oslo","days":1}, weather{"city":"rome","days":1}, '
        'weather{"city":"paris","days":1}. Record the call with mode=\'replay_or_record\', or use on_missing=\'error\' '
        "to answer the model with an error tool result instead.")
    with pytest.raises(CassetteError, match=r"The cassette has no calls of lookup \(it has calls of: weather\)\."):
        strict.call("lookup", {"q": 1})


# ---------------------------------------------------------------------------- file errors


def _write(path, *lines):
    path.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines))
    return path


HEADER = {"format": FORMAT, "version": VERSION, "redaction": None, "tools": [], "metadata": {}}


@pytest.mark.parametrize("lines, match", [
    ((), r"the file is empty; a cassette starts with a header line"),
    (({"tool": "f"},), r"line 1: not a cassette header"),
    (({**HEADER, "version": 2},), r"line 1: unsupported cassette version 2 \(this mtrl_gym reads version 1\); "
                                  r"written by a newer mtrl_gym; upgrade it"),
    (({**HEADER, "version": "1"},), r"line 1: unsupported cassette version '1'"),
    (({**HEADER, "extra": 1},), r"line 1: unknown header field\(s\) \['extra'\]"),
    ((HEADER, "", '{"tool": "f", "arguments": {}, "response": 1'), r"line 3: invalid JSON \(Expecting ',' delimiter"),
    ((HEADER, [1]), r"line 2: an interaction must be a JSON object, got list"),
    ((HEADER, {"tool": "", "arguments": {}, "response": 1}), r"line 2: 'tool' must be a non-empty string"),
    ((HEADER, {"tool": "f", "arguments": [], "response": 1}), r"line 2: 'arguments' must be a JSON object"),
    ((HEADER, {"tool": "f", "arguments": {}}), r"line 2: an interaction needs 'response' or 'error'"),
    ((HEADER, {"tool": "f", "arguments": {}, "response": 1, "latency": 3}),
     r"line 2: unknown field\(s\) \['latency'\]"),
    ((HEADER, {"tool": "f", "arguments": {}, "response": 1, "latency_ms": -1}), r"line 2: 'latency_ms' must be"),
    ((HEADER, {"tool": "f", "arguments": {}, "error": 5}), r"line 2: 'error' must be a string or null"),
])
def test_corrupt_or_wrong_version_files_name_the_file_and_line(tmp_path, lines, match):
    path = _write(tmp_path / "bad.jsonl", *lines)
    with pytest.raises(CassetteError, match=rf"^{path}(, )?.*{match}" if lines else rf"^{path}: {match}"):
        Cassette(path)


def test_missing_file_in_replay_mode(tmp_path):
    with pytest.raises(CassetteError, match=r"no such cassette file\. Record it first with mode='record'"):
        Cassette(tmp_path / "none.jsonl")


def test_later_lines_win_and_hand_written_arguments_are_canonicalised(tmp_path):
    path = _write(tmp_path / "c.jsonl", HEADER, {"tool": "f", "arguments": {"b": 1.0, "a": 2}, "response": "old"},
                  {"tool": "f", "arguments": {"a": 2, "b": 1}, "response": "new"})
    c = Cassette(path)
    assert len(c) == 1 and c.call("f", {"a": 2.0, "b": 1}).value == "new"


def test_save_round_trip_keeps_everything(tmp_path):
    c = Cassette(tmp_path / "a.jsonl", mode="record", tools=[weather.schema], metadata={"api": "test"})
    c.call(weather, {"city": "Zürich \ud800", "days": 1}, live=live({"text": "naïve \ud800"}))
    c.save()
    d = Cassette(tmp_path / "a.jsonl")
    assert d.tools == [weather.schema] and d.metadata == {"api": "test"}
    assert [i.to_json() for i in d] == [i.to_json() for i in c]


# ------------------------------------------------------------------------------ redaction


SECRETS = {
    "email": "ann.lee+test@mail.example.co.uk",
    "bearer": "Authorization: Bearer abcdef123456.ghijkl",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
    "api_key": "key sk-proj-AbCdEf0123456789XyZ",
    "github_token": "ghp_" + "a1B2" * 9,
    "slack_token": "xoxb-1234567890-abcdef",
    "google_api_key": "AIza" + "Sy" + "A" * 33,
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "url_credentials": "https://admin:hunter2@db.internal/x",
    "query_secret": "https://api.test/v1?city=Oslo&api_key=abc123&x=1",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_default_patterns_redact_each_kind_of_secret(kind):
    text = SECRETS[kind]
    out = Redactor().redact(text)
    assert f"[REDACTED:{kind}:" in out
    secret_part = {"bearer": "abcdef123456", "url_credentials": "hunter2", "query_secret": "abc123",
                   "api_key": "sk-proj"}.get(kind, text)
    assert secret_part not in out


def test_redaction_keeps_context_keys_and_is_idempotent():
    r = Redactor()
    value = {"q": "https://api.test/v1?city=Oslo&token=t0k&x=1", "Api-Key": 12345, "nested": [{"refresh_token": "r"}],
             "note": "contact ann@example.com"}
    out = r.redact(value)
    assert out["q"].startswith("https://api.test/v1?city=Oslo&token=[REDACTED:query_secret:")
    assert out["q"].endswith("&x=1")
    assert out["Api-Key"].startswith("[REDACTED:secret:") and out["nested"][0]["refresh_token"].startswith("[REDACTED:")
    assert out["note"].startswith("contact [REDACTED:email:")
    assert r.redact(out) == out


def test_hash_salt_and_unhashed_placeholders():
    a, b = Redactor().redact("ann@example.com"), Redactor(salt="s3cret").redact("ann@example.com")
    assert a != b and a.startswith("[REDACTED:email:") and b.startswith("[REDACTED:email:")
    assert Redactor(hashed=False).redact("x ann@example.com y") == "x [REDACTED:email] y"


def test_user_patterns_and_keys():
    r = Redactor({"ssn": r"\b\d{3}-\d{2}-\d{4}\b", "pin": r"PIN (?P<secret>\d{4})"}, keys=["customer_ref"])
    out = r.redact({"text": "SSN 123-45-6789, PIN 0042", "customer_ref": "CR-9"})
    assert out["text"].startswith("SSN [REDACTED:ssn:") and ", PIN [REDACTED:pin:" in out["text"]
    assert out["customer_ref"].startswith("[REDACTED:secret:")
    with pytest.raises(ValueError, match=r"redaction pattern 'bad' is not a valid regular expression"):
        Redactor({"bad": "("})
    with pytest.raises(ValueError, match=r"redaction pattern names must be 1-32 characters"):
        Redactor({"Bad Name": "x"})


def test_recorded_secrets_never_reach_the_file_and_redacted_arguments_still_match(tmp_path):
    @tool(network=True)
    def find(email: str) -> dict:
        """Find."""
        return {}

    path = tmp_path / "c.jsonl"
    rec = Cassette(path, mode="record", redactor=Redactor({"ssn": r"\d{3}-\d{2}-\d{4}"}))
    out = rec.call(find, {"email": "ann@example.com"},
                   live=live({"email": "ann@example.com", "token": "tok-1", "ssn": "123-45-6789", "name": "Ann"}))
    assert out.value["name"] == "Ann" and out.value["email"].startswith("[REDACTED:email:")
    rec.save()
    text = path.read_text()
    for secret in ("ann@example.com", "tok-1", "123-45-6789"):
        assert secret not in text
    replay = Cassette(path)  # the header carries the redaction, user pattern included
    assert replay.call(find, {"email": "ann@example.com"}).value == out.value
    placeholder = out.value["email"]  # a placeholder copied back by the model matches too
    assert replay.call(find, {"email": placeholder}).value == out.value
    with pytest.raises(CassetteError, match=r"the given redactor differs from the one the cassette was recorded with"):
        Cassette(path, redactor=Redactor())
