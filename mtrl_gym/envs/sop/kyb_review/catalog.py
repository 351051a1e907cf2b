"""Reference data and comparison rules of the KYBReview domain (SOP FC-210, section 3).

Business-name normalisation (:func:`business_key`), person-name comparison
(:func:`person_key`) and the watch-list match score (:func:`match_score`) live here
because the tools, the reference procedure and the generator must all use the very same
definitions. Word lists are synthetic.
"""

from __future__ import annotations

import difflib
import functools
import re
from types import MappingProxyType

__all__ = ["business_key", "person_key", "match_score", "score_bound", "ACTIVE_STATUSES", "INACTIVE_STATUSES",
           "BUSINESS_ACCOUNT_TYPES", "PERSONAL_ACCOUNT_TYPES", "JURISDICTIONS", "NAME_STEMS", "NAME_TRADES",
           "LEGAL_FORMS", "FIRST_NAMES", "LAST_NAMES", "BANKS", "TITLES", "DECISION_PREFIX", "SCREEN_MIN_SCORE",
           "MATCH_THRESHOLD", "WATCH_LISTS"]

ACTIVE_STATUSES = ("active", "good standing", "in existence")
INACTIVE_STATUSES = ("dissolved", "administratively dissolved", "suspended", "revoked", "forfeited")
BUSINESS_ACCOUNT_TYPES = ("business_checking", "business_savings")
PERSONAL_ACCOUNT_TYPES = ("personal_checking", "personal_savings")
JURISDICTIONS = ("DE", "NY", "CA", "TX", "WA", "FL", "IL", "NV")

NAME_STEMS = ("Birch Hollow", "Northgate", "Silver Fern", "Harborview", "Redstone", "Bluewater", "Kestrel",
              "Ironbridge", "Maple & Finch", "Cobalt Ridge", "Juniper Lane", "Copperfield", "Westmarch",
              "Lantern Bay", "Oak & Anchor", "Sterling Peak")
NAME_TRADES = ("Logistics", "Foods", "Consulting", "Holdings", "Fabrication", "Trading", "Analytics", "Interiors",
               "Freight", "Software", "Textiles", "Ventures")
#: canonical legal form -> spellings that normalise to it (SOP 3.1)
LEGAL_FORMS: MappingProxyType = MappingProxyType({
    "LLC": ("LLC", "L.L.C.", "Limited Liability Company", "llc"),
    "Inc": ("Inc", "Inc.", "Incorporated", "INC."),
    "Corp": ("Corp", "Corp.", "Corporation"),
    "Ltd": ("Ltd", "Ltd.", "Limited"),
    "Co": ("Co", "Co.", "Company"),
})
TITLES = ("Chief Executive Officer", "Managing Member", "President", "Chief Operating Officer", "General Manager")
FIRST_NAMES = ("Anna", "Bruno", "Celia", "Darius", "Elena", "Felix", "Greta", "Hamid", "Irene", "Jonas", "Katya",
               "Luca", "Mira", "Nikolai", "Olga", "Pavel", "Rania", "Stefan", "Talia", "Viktor", "Wen", "Yusuf",
               "Zora", "Amir", "Bianca", "Cyrus", "Dalia", "Emil")
LAST_NAMES = ("Abramov", "Baranski", "Castillo", "Delacroix", "Ekwueme", "Fontaine", "Grigoryan", "Halvorsen",
              "Iwasaki", "Jovanovic", "Karimov", "Lindgren", "Marchetti", "Novak", "Oyelaran", "Petrosyan",
              "Quintero", "Rasmussen", "Szabo", "Takahashi", "Ulyanov", "Vasquez", "Whitfield", "Zielinski")
#: routing number -> bank name
BANKS: MappingProxyType = MappingProxyType({
    "021000089": "First Meridian Bank", "026009593": "Coastal Trust", "111000614": "Prairie National Bank",
    "122105278": "Pacific Crest Bank", "031176110": "Keystone Savings",
})
WATCH_LISTS = ("Consolidated Sanctions List", "Financial Sanctions Register", "Restricted Parties List")
#: decision -> case-id letter (the case system files each decision in its own queue)
DECISION_PREFIX: MappingProxyType = MappingProxyType({"approve": "A", "escalate": "E", "request_information": "R"})
#: screen_sanctions returns hits scoring at least this much.
SCREEN_MIN_SCORE = 70
#: SOP 5.2: hits below this score are ignored.
MATCH_THRESHOLD = 85

_DROP = re.compile(r"[.,']")
_FORMS = {"INCORPORATED": "INC", "CORPORATION": "CORP", "COMPANY": "CO", "LIMITED": "LTD"}


def business_key(name: str) -> str:
    """A business name normalised by SOP 3.1 (two names are the same when their keys are equal).

    >>> business_key("Birch & Finch, L.L.C.") == business_key("BIRCH AND FINCH LLC")
    True
    >>> business_key("Birch & Finch Limited Liability Company"), business_key("Oak Corporation")
    ('BIRCH AND FINCH LLC', 'OAK CORP')
    """
    text = " ".join(_DROP.sub("", str(name).upper().replace("&", " AND ")).split())
    text = f" {text} ".replace(" LIMITED LIABILITY COMPANY ", " LLC ").strip()
    return " ".join(_FORMS.get(w, w) for w in text.split())


def person_key(name: str) -> str:
    """A person name compared by SOP 3.2: case-folded, whitespace collapsed."""
    return " ".join(str(name).split()).casefold()


def match_score(query: str, listed: str) -> int:
    """The watch-list match score (0-100) of a screened name against a listed name.

    >>> match_score("Anna Novak", "ANNA  NOVAK"), match_score("Anna Novak", "Zora Castillo") < 70
    (100, True)
    """
    return _score(person_key(query), person_key(listed))


def score_bound(query: str, listed: str) -> float:
    """A cheap upper bound of :func:`match_score` (shared letters, ignoring order), to skip clear non-matches.

    >>> score_bound("Anna Novak", "Anna Nowak") >= match_score("Anna Novak", "Anna Nowak")
    True
    """
    return _bound(person_key(query), person_key(listed))


@functools.lru_cache(maxsize=1 << 14)
def _bound(a: str, b: str) -> float:
    if not a and not b:
        return 100.0
    return 200 * sum(min(a.count(c), b.count(c)) for c in set(a)) / (len(a) + len(b))


@functools.lru_cache(maxsize=1 << 14)
def _score(a: str, b: str) -> int:
    # Pure and hot (every screening scores every listed entry, and the label is recomputed
    # on every reset): cached by the normalised names.
    return round(100 * difflib.SequenceMatcher(None, a, b, autojunk=False).ratio())
