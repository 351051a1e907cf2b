"""Secret redaction for cassettes: API keys, tokens, e-mail addresses and your own patterns.

A :class:`Redactor` walks a JSON value and replaces secrets with placeholders such as
``[REDACTED:email:5f1c2a9e]``. Cassettes apply it when recording (to arguments, responses
and metadata) and, in every mode, to the arguments of incoming calls *before* matching:
because a placeholder depends only on the secret (a keyed BLAKE2b digest), a recorded
``find_customer(email="ann@example.com")`` is stored as
``find_customer(email="[REDACTED:email:…]")`` and a replayed call with the same address
still matches it. Placeholders are never matched again, so redaction is idempotent and a
placeholder the model copies from one response into a later call matches too.

What is redacted by default:

* strings matching :data:`DEFAULT_PATTERNS`, applied in order: credentials in URLs,
  e-mail addresses, ``Bearer`` tokens, JWTs, OpenAI/Stripe/GitHub/Slack/Google/AWS key
  formats, and the values of ``api_key=``/``token=``/``password=``-like URL parameters;
* the whole value of any object key in :data:`DEFAULT_SECRET_KEYS` (``api_key``,
  ``authorization``, ``password``, ...; compared case-insensitively, ``-`` == ``_``) and
  of keys ending in ``_token``, ``_secret``, ``_password`` or ``_api_key``.

The digest is keyed with ``salt`` (empty by default). An unsalted digest of a
low-entropy secret such as an e-mail address can be confirmed by guessing; set a private
salt (the same one when replaying) when that matters, or ``hashed=False`` for a fixed
placeholder (then distinct secrets become indistinguishable and may collide in matching).

>>> r = Redactor()
>>> r.redact({"to": "ann@example.com", "api_key": "abc", "note": "call me"})
{'to': '[REDACTED:email:c4ff67af]', 'api_key': '[REDACTED:secret:63906248]', 'note': 'call me'}
>>> r.redact(r.redact("ann@example.com")) == r.redact("ann@example.com")
True
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Redactor", "DEFAULT_PATTERNS", "DEFAULT_SECRET_KEYS", "PLACEHOLDER_RE"]

#: Pattern name -> regular expression. A named group ``secret`` limits redaction to that part.
#: Every pattern costs linear time in the text: a match may only start where a run of the
#: characters it repeats begins (a look-behind), so no run is scanned from each of its
#: positions (``"a" * 45_000`` as an e-mail candidate took 1 s per call before).
DEFAULT_PATTERNS: dict[str, str] = {
    "url_credentials": r"(?<=://)(?P<secret>[^/\s:@]+:[^/\s@]+)(?=@)",
    "email": r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}",
    "bearer": r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=\-]{8,})",
    "jwt": r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}",
    "api_key": r"\b(?:sk|pk|rk)[-_](?:live_|test_|proj-|ant-)?[A-Za-z0-9_\-]{16,}",
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
    "slack_token": r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
    "google_api_key": r"\bAIza[0-9A-Za-z_\-]{35}",
    "aws_access_key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "query_secret": r"(?i)[?&](?:api[_-]?key|access[_-]?token|token|key|secret|password|sig|signature)="
                    r"(?P<secret>[^&\s#\"']+)",
}

#: Earlier versions of default patterns (stored in cassette headers) -> their linear-time
#: equivalents, which match the same text: a cassette recorded before the change replays
#: with the same placeholders at linear cost.
_LINEAR_EQUIVALENTS: dict[str, str] = {
    r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}": DEFAULT_PATTERNS["email"],
    r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}": DEFAULT_PATTERNS["jwt"],
}

#: Object keys whose values are always redacted (case-insensitive, ``-`` and ``_`` equal).
DEFAULT_SECRET_KEYS: frozenset[str] = frozenset({
    "api_key", "apikey", "x_api_key", "token", "access_token", "refresh_token", "id_token", "auth",
    "authorization", "proxy_authorization", "password", "passwd", "secret", "client_secret", "private_key",
    "cookie", "set_cookie", "session_token",
})
_SECRET_SUFFIXES = ("_token", "_secret", "_password", "_api_key", "_apikey")

#: What a placeholder looks like; text matching it is never redacted again.
PLACEHOLDER_RE = re.compile(r"\[REDACTED:[a-z0-9_]+(?::[0-9a-f]{8})?\]")


class Redactor:
    """Replaces secrets in JSON values with stable placeholders (see the module docstring).

    Args:
        patterns: extra ``{name: regex}`` to redact (names: lower-case letters, digits, ``_``).
        keys: extra object keys whose values are always redacted.
        defaults: include :data:`DEFAULT_PATTERNS` and :data:`DEFAULT_SECRET_KEYS`.
        hashed: placeholders carry a digest of the secret (needed to match redacted arguments).
        salt: key of the digest; keep it private and use the same one when replaying.
    """

    def __init__(self, patterns: Mapping[str, str] | None = None, *, keys: Iterable[str] = (),
                 defaults: bool = True, hashed: bool = True, salt: bytes | str = b""):
        merged = dict(DEFAULT_PATTERNS) if defaults else {}
        for name, pattern in (patterns or {}).items():
            if not re.fullmatch(r"[a-z0-9_]{1,32}", str(name)):
                raise ValueError(f"redaction pattern names must be 1-32 characters a-z, 0-9 or _, got {name!r}")
            merged[str(name)] = _LINEAR_EQUIVALENTS.get(pattern, pattern)
        self.patterns = merged
        self._compiled = []
        for name, pattern in merged.items():
            try:
                self._compiled.append((name, re.compile(pattern)))
            except re.error as e:
                raise ValueError(f"redaction pattern {name!r} is not a valid regular expression ({e}): "
                                 f"{pattern!r}") from None
        self.keys = frozenset(_norm_key(k) for k in ((DEFAULT_SECRET_KEYS if defaults else frozenset()) | set(keys)))
        self.hashed = bool(hashed)
        self._salt = salt.encode() if isinstance(salt, str) else bytes(salt)
        self._memo: dict[str, str] = {}  # redaction is pure: replayed arguments repeat

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, salt: bytes | str = b"") -> Redactor:
        """Rebuild the redactor a cassette header describes (see :meth:`config`)."""
        patterns = config.get("patterns") or {}
        keys = config.get("keys") or ()
        if not isinstance(patterns, Mapping) or not isinstance(keys, (list, tuple)):
            raise ValueError("redaction config must have 'patterns' (an object) and 'keys' (a list)")
        return cls(dict(patterns), keys=keys, defaults=False, hashed=bool(config.get("hashed", True)), salt=salt)

    def config(self) -> dict[str, Any]:
        """A JSON description (patterns, keys, hashed; never the salt) stored in cassette headers."""
        return {"patterns": dict(self.patterns), "keys": sorted(self.keys), "hashed": self.hashed}

    def placeholder(self, kind: str, secret: str) -> str:
        """The placeholder of ``secret``: ``[REDACTED:kind:digest]`` (or ``[REDACTED:kind]``)."""
        if not self.hashed:
            return f"[REDACTED:{kind}]"
        digest = hashlib.blake2b(secret.encode("utf-8", "surrogatepass"), digest_size=4,
                                 key=self._salt[:64]).hexdigest()
        return f"[REDACTED:{kind}:{digest}]"

    def redact_text(self, text: str) -> str:
        """``text`` with every pattern match replaced by its placeholder."""
        if len(text) <= 256:
            hit = self._memo.get(text)
            if hit is None:
                if len(self._memo) >= 50_000:
                    self._memo.clear()
                hit = self._memo[text] = self._redact_text(text)
            return hit
        return self._redact_text(text)

    def _redact_text(self, text: str) -> str:
        for name, rx in self._compiled:
            if len(text) > 200_000:
                break
            text = rx.sub(lambda m, n=name: self._replace(m, n), text)
        return text

    def _replace(self, m: re.Match, kind: str) -> str:
        whole = m.group(0)
        if PLACEHOLDER_RE.search(whole):
            return whole
        if "secret" in m.re.groupindex and m.group("secret") is not None:
            s, e = m.span("secret")
            start = m.start()
            return whole[:s - start] + self.placeholder(kind, m.group("secret")) + whole[e - start:]
        return self.placeholder(kind, whole)

    def redact(self, value: Any, _depth: int = 0) -> Any:
        """A copy of a JSON value with secrets replaced (strings, object values, nested)."""
        if _depth > 64:
            return value
        if isinstance(value, str):
            return self._split_placeholders(value)
        if isinstance(value, (list, tuple)):
            return [self.redact(v, _depth + 1) for v in value]
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                if isinstance(k, str) and self.is_secret_key(k) and not _is_placeholder(v):
                    out[k] = self.placeholder("secret", v if isinstance(v, str) else repr(v))
                else:
                    out[k] = self.redact(v, _depth + 1)
            return out
        return value

    def _split_placeholders(self, text: str) -> str:
        # Redact the text between existing placeholders only, so they stay intact.
        if "[REDACTED:" not in text:
            return self.redact_text(text)
        out, pos = [], 0
        for m in PLACEHOLDER_RE.finditer(text):
            out.append(self.redact_text(text[pos:m.start()]))
            out.append(m.group(0))
            pos = m.end()
        out.append(self.redact_text(text[pos:]))
        return "".join(out)

    def is_secret_key(self, key: str) -> bool:
        """True when values under object key ``key`` are always redacted."""
        k = _norm_key(key)
        return k in self.keys or k.endswith(_SECRET_SUFFIXES)

    def __repr__(self) -> str:
        return f"Redactor(patterns={sorted(self.patterns)}, keys={len(self.keys)}, hashed={self.hashed})"


def _norm_key(key: str) -> str:
    return str(key).strip().lower().replace("-", "_")


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and PLACEHOLDER_RE.fullmatch(value) is not None
