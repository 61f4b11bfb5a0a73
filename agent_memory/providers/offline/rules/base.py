"""The rule record and the value patterns the rule tables are written with (English and Chinese
values, amounts of money)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from agent_memory.core.models import FactOperation
from agent_memory.providers.offline.values import _clean

_EV = r"(?P<v>[^.,!?;:\n()]{1,80})"  # English value: up to the clause boundary
# A proper noun; in lower case too ("moved to lisbon"), which _place accepts only for a known city.
_PV = r"(?P<v>(?:(?-i:St|Mt|Dr|Ft)\.\s+)?[A-Za-z0-9\u00C0-\u024F](?:[^.,!?;:\n()]|\.(?=\w)){0,60})"  # a proper noun
# One character of a Chinese value (text is NFKC-normalised); emoji and symbols end a value.
_ZC = r"[^\s,.!?;:。、()\"|\u2600-\u27bf\U0001f000-\U0001faff]"
_ZV = rf"(?P<v>{_ZC}{{1,16}})"
_ZEND = r"(?=$|[,.!?;:\s。、]|了|啦|呀|啊)"
_ZADV = r"(?:很|最|非常|特别|真的|也|还|超|挺|蛮|一直|都|比较|更|好|超级|太)*"
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
# Amounts in words: "eight grand", "fifteen hundred quid", "two thousand dollars".
_NUM_WORD = (r"(?:a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
             r"seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|couple)")
_WORD_AMOUNT = (rf"{_NUM_WORD}(?:[\s-]+{_NUM_WORD})*\s+(?:grand|thousand|hundred)(?:\s+(?:quid|bucks|dollars|euros|pounds))?|"
                rf"{_NUM_WORD}(?:[\s-]+{_NUM_WORD})*\s+(?:quid|bucks|dollars|euros|pounds)")
_MONEY = (rf"(?P<v>(?:{_WORD_AMOUNT}|[$€£¥]\s?{_NUM}(?:\s?(?:k|thousand|million)\b)?|{_NUM}(?:\s?(?:k|thousand|million)\b)?"
          r"(?:\s?(?:dollars|bucks|usd|eur|euros?|gbp|pounds|quid|yuan|rmb|cny|rupees|rs|inr|yen|francs|chf|kronor|krona|kr|"
          r"zloty|pesos|rand|ringgit|baht|won|dirhams?|aed|sgd|aud|cad)\b)?)"
          r"(?:\s*/\s*(?:month|mo|week|wk|year|yr|night|day)\b|\s+(?:per|a)\s+(?:month|week|year|night|day|person)\b)?)")
# An amount that is money by its own marks (a currency, "bucks", "k"): a bare number is not.
_MONEY_MARKED = (rf"(?P<v>(?:{_WORD_AMOUNT}|[$€£¥]\s?{_NUM}(?:\s?(?:k|thousand|million)\b)?|{_NUM}\s?(?:k\b|thousand\b|million\b)?"
                 r"\s?(?:dollars|bucks|usd|eur|euros?|gbp|pounds|quid|yuan|rmb|cny|rupees|rs|inr|yen|francs|chf|kronor|krona|kr|"
                 rf"zloty|pesos|rand|ringgit|baht|won|dirhams?|aed|sgd|aud|cad)\b|{_NUM}\s?k\b)"
                 r"(?:\s*/\s*(?:month|mo|week|wk|year|yr|night|day)\b|\s+(?:per|a)\s+(?:month|week|year|night|day|person)\b)?)")
_PURPOSE_WORDS = (r"laptop|notebook|computer|pc|phone|mobile|trip|travel|vacation|holiday|rent|apartment|flat|housing|"
                  r"groceries|grocery|food|renovation|wedding|car|bike|house")
_ZH_NUM = r"(?:\d+(?:\.\d+)?|[一二两三四五六七八九十百千万]+)"
_ZH_MONEY = rf"(?P<v>(?:[$¥]\s?)?{_ZH_NUM}\s?(?:万元|万块|万|千元|千|元|块钱|块|美元|欧元|人民币|刀|[kKwW](?![a-zA-Z]))?[一二三四五六七八九]?)"


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    namespace: str
    key: str  # a literal key, or a template using {slug} of the value
    clean: Callable[[str], str | None] = _clean
    confidence: float = 0.9
    temporary: bool = False
    make: Callable[[re.Match[str], str], list[tuple[str, str]] | None] | None = None  # custom [(key, value)]
    op: FactOperation = "assert"
    # What a negation or "no longer" does to this statement: end the fact, flip it (like ->
    # dislike), or nothing (the statement is dropped).
    on_negation: str = "end"
    subject: bool = True  # the user must be the subject (checked on the words before the match)
    # Overlap with earlier matches is judged from the value only: the words before it were
    # already read by another rule ("I'm a nurse" + "at St. Mary's"; "离开华为了，现在在小米").
    value_span: bool = False


def _r(pattern: str, namespace: str, key: str, **kw: object) -> _Rule:
    return _Rule(re.compile(pattern, re.I), namespace, key, **kw)  # type: ignore[arg-type]


def _const(key: str, value: str) -> Callable[[re.Match[str], str], list[tuple[str, str]]]:
    return lambda m, s: [(key, value)]

def _end_value(m: re.Match[str], sentence: str) -> list[tuple[str, str]]:
    return [("", "")]
