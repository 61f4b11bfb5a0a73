"""Facts of one message: its sentences' statements, plus what spans sentences (a pet named by a
pronoun, a pair of names and their species, a signature, two homes in one message)."""

from __future__ import annotations

import re

from agent_memory.core.models import ExtractedFact, Message
from agent_memory.core.timeexpr import MONTH_WORDS, WEEKDAYS
from agent_memory.providers.offline.corrections import _CORRECTION
from agent_memory.providers.offline.gazetteer import is_chinese_city, leading_city
from agent_memory.providers.offline.lexicon import (
    _EN_SPECIES,
    _KIN,
    _NOT_NAMES,
    _ZH_KIN,
    _ZH_SPECIES,
    _ZH_SURNAMES,
    _may_be_given_name,
    _species,
)
from agent_memory.providers.offline.rules.base import _ZC
from agent_memory.providers.offline.rules.pets import _species_in, _zh_species_in
from agent_memory.providers.offline.sentence import (
    _JOKE_SKIP,
    _JOKE_SOFT,
    _SARCASM,
    _SENTENCE_SPLIT,
    _hypothetical,
    _prepare,
    _statement_part,
)
from agent_memory.providers.offline.statements import _sentence_facts
from agent_memory.providers.offline.timing import _observed_at
from agent_memory.providers.offline.values import _CJK, _has_cjk, _slug
from agent_memory.providers.offline.zh_segment import could_be_a_name

_PRONOUN_SPECIES = re.compile(r"\b(?:she|he)(?:'s|\s+is)\s+(?:a|an|my|our)\s+(?:[\w-]+\s+){0,3}?" + _EN_SPECIES
                              + r"\b(?!\s+(?:person|people|lover|owner|sitter|walker|mom|mum|dad|trainer|groomer|whisperer))", re.I)


_NAME_PAIR = re.compile(r"\b((?-i:[A-Z])[a-z]+)\s+(?:and|&)\s+((?-i:[A-Z])[a-z]+)\b")
_BOTH_SPECIES = re.compile(r"^\s*(?:they're\s+|they\s+are\s+)?both\s+(?:[\w-]+\s+)?" + _EN_SPECIES + r"s?\b", re.I)


def _possessed_names(text: str) -> list[str]:
    """Capitalised names in a possessive inside a sentence ("the vet charged me £400 for Juno's teeth")."""
    return [n for n in re.findall(r"(?<=\s)((?-i:[A-Z])[a-z]{2,})'s\b", text)
            if n.lower() not in _NOT_NAMES and not re.fullmatch(_KIN, n, re.I) and not leading_city(n.lower())
            and n.lower() not in WEEKDAYS and n.lower() not in MONTH_WORDS]


_ZH_PET_DOING = re.compile(r"(?:^|(?<=[,，。!！\s]))(?P<n>[\u4e00-\u9fff]{2,3}?)(?:最近|又|总是|老是|天天|今天)?(?:掉毛|拆家|乱叫|狂叫|"
                           r"叫个不停|乱尿|随地|挑食|打喷嚏|吐毛球|抓沙发)")
_PET_DOING = re.compile(r"(?:^|(?<=[\s,]))(?P<n>(?-i:[A-Z])[a-z]+)(?:'s|\s+has|\s+is|\s+keeps|\s+won't|\s+just)?\s+(?:been\s+|started\s+|keeps\s+)?"
                        r"(?:howl|bark|meow|miaow|purr|wag|hiss|whin|growl|fetch|yowl|nibbl|gnaw)\w*\b", re.I)
_QUOTED_SIGN_OFF = re.compile(r"\b(?:end|sign|finish|close)\s+(?:it\s+)?(?:off\s+)?(?:with|as)\s+['\"‘“](?:[^'\"’”]{0,20}?,\s*)?"
                              r"(?P<v>(?-i:[A-Z])[a-z]+)['\"’”]", re.I)
_CALLS_ME = re.compile(r"\b(?:calls?|call)\s+me\b|\bthat's\s+me\b|\bwhat\s+I\s+go\s+by\b|\bmy\s+name\b", re.I)
# A name signed under a message ("…thanks!\n\n— Hamish", "Cheers,\nPriya").
_SIGN_OFF = re.compile(r"(?:\n\s*|[.!?]\s+)(?:[-—–~]+\s*|(?:cheers|thanks|thank\s+you|best|regards|love|xx|ta|talk\s+soon)"
                       r"[\s,!.]*\n\s*[-—–~]*\s*)(?P<v>(?-i:[A-Z])[a-z]+)(?P<z>)\s*[.!]?\s*$", re.I)
# "…谢谢！——1502 陈一帆”": a Chinese signature after a dash, a room number allowed.
_ZH_SIGN_OFF = re.compile(r"(?:——|—|--)\s*(?:\d+\s*|[\u4e00-\u9fff]{1,6}\s+)?(?P<v>)(?P<z>[" + _ZH_SURNAMES + r"][" + _CJK + r"]{1,2})\s*[”\"」』]?\s*$")
_PRONOUN_NAME = re.compile(r"\b(?:(?:she|he|it)(?:'s|\s+is)\s+(?:called|named)|(?:named|call(?:ed)?)\s+(?:him|her|it)|"
                           r"(?:his|her|its)\s+name(?:'s|\s+is))\s+(?P<n>(?-i:[A-Z])[\w'-]*)|"
                           r"(?:它|他|她)叫(?P<z>" + _ZC + r"{1,4})", re.I)


def _bare_quip(text: str) -> bool:
    rest = _JOKE_SOFT.sub(" ", text)
    size = len(re.findall(r"[A-Za-z0-9']+", rest)) + len(re.findall("[" + _CJK + "]", rest)) / 2
    return size <= 5


# A fronted topic answered by a pronoun: "horror movies? hate them." -> "I hate horror movies."
_TOPIC_FRONT = re.compile(r"(?:^|(?<=[.!]\s))(?P<np>[A-Za-z][\w' -]{1,40}?)\?\s+(?P<verb>(?:I\s+)?(?:really\s+|absolutely\s+)?"
                          r"(?:hate|love|like|adore|detest|loathe|can't\s+stand|enjoy))\s+(?:them|it|those|that)\b", re.I)


def _message_facts(message: Message) -> list[ExtractedFact]:
    text = _TOPIC_FRONT.sub(lambda m: "I " + re.sub(r"^I\s+", "", m["verb"]) + " " + m["np"], _prepare(message.content))
    # A short quoted phrase is a mention, not a statement ("I wrote 'my wife' but we are not married").
    text = re.sub(r"(?<![\w])(['\"])(?:[^'\"]{1,25})\1(?![\w])", " ", text)
    # So is a sentence quoted in Chinese or curly quotes (他写的是“我以前住在西安”).
    text = re.sub(r"[“「『][^”」』]{1,40}[”」』]", " ", text)
    if _JOKE_SKIP.search(text) or _SARCASM.search(text):
        return []  # a retracted or ironic statement is not evidence of anything
    # Laughter caps confidence only on a bare quip ("lol I'm a chef now"); in a message that
    # goes on about the thing it is tone, not a retraction ("got the keys!! I live in Bristol now lol").
    laugh = _JOKE_SOFT.search(text)
    confidence_cap = 0.4 if laugh and _bare_quip(text) else 1.0
    said = _CORRECTION.search(text)
    correction_from = said.start() if said else len(text) + 1
    found: list[tuple[int, int, ExtractedFact]] = []
    species: str | None = None
    mentioned: list[str] = []  # names said in a possessive so far ("Juno's teeth")
    couple: list[str] = []  # two names said together in the sentence before ("Bruno and Tess")
    offset = 0
    for sentence_index, raw_sentence in enumerate(_SENTENCE_SPLIT.split(text)):
        begin = text.find(raw_sentence or "", offset)
        offset = max(offset, begin + len(raw_sentence or ""))
        # A correction reaches the statements from its own sentence on ("I live in Graz. sorry, I
        # meant Linz!": Graz is what it corrects, not a correction).
        # The whole sentence that says it: a slip and its fix in one sentence ("住在无锡啊不对，口误，是常州")
        # both read as corrections, and the later one wins.
        correction: int | None = 0 if begin + len(raw_sentence or "") > correction_from else None
        sentence = _statement_part(raw_sentence or "")
        if not sentence:
            continue
        for start, fact in _sentence_facts(sentence, message, correction=correction, confidence_cap=confidence_cap):
            found.append((sentence_index, start, fact))
        if said := re.search(r"\b" + _EN_SPECIES + r"\b|" + _ZH_SPECIES.replace("?P<s>", ""), sentence, re.I):
            species = _species(said.group(0))
            if any(f.namespace == "pet" and f.key != _slug(f.value) for _, _, f in found if _ == sentence_index):
                species = None  # already named in this sentence
        if species and (m := _PRONOUN_NAME.search(sentence)) and not _hypothetical(sentence, m.start()):
            name = m["n"] or m["z"]
            found.append((sentence_index, m.start(), ExtractedFact(
                namespace="pet", key=_slug(name), value=species, confidence=min(0.9, confidence_cap),
                evidence_message_ids=[message.message_id],
                observed_at=_observed_at(text, message.created_at, temporary=False))))
            species = None
        # "…for Juno's teeth. She's a nine-year-old springer spaniel": the pronoun is the pet just named.
        if (m := _PRONOUN_SPECIES.search(sentence)) and not _hypothetical(sentence, m.start()) \
                and not any(f.namespace == "pet" for i, _, f in found if i == sentence_index) \
                and (names := mentioned + _possessed_names(sentence[:m.start()])) \
                and not any(f.namespace == "pet" and f.key == _slug(names[-1]) for _, _, f in found):
            found.append((sentence_index, m.start(), ExtractedFact(
                namespace="pet", key=_slug(names[-1]), value=_species(m["s"]), confidence=min(0.9, confidence_cap),
                operation="assert" if correction is None else "correct",
                evidence_message_ids=[message.message_id],
                observed_at=_observed_at(text, message.created_at, temporary=False))))
        # "walking Bruno and Tess twice a day … both labs": a pair named, then their species.
        if (m := _BOTH_SPECIES.search(sentence)) and couple and not _hypothetical(sentence, m.start()):
            found += [(sentence_index, m.start(), ExtractedFact(
                namespace="pet", key=_slug(name), value=_species(m["s"]), confidence=min(0.9, confidence_cap),
                operation="assert" if correction is None else "correct", evidence_message_ids=[message.message_id],
                observed_at=message.created_at)) for name in couple]
            couple = []
        if pair := _NAME_PAIR.search(sentence):
            couple = [n for n in pair.groups() if _may_be_given_name(n)]
            couple = couple if len(couple) == 2 else []
        mentioned += _possessed_names(sentence)
    # "平时就在宁波上班": an employer that is a place names where one lives and works, not who employs one.
    # With a home said beside it ("在厦门上班，人住泉州"), the city one works in is neither.
    placed = any(f.namespace == "location" for _, _, f in found)
    found = [(i, at, f.model_copy(update={"namespace": "location", "key": "home_city"})
              if f.namespace == "work" and f.key == "employer" and f.operation == "assert" and _has_cjk(f.value)
              and is_chinese_city(f.value) else f) for i, at, f in found
             if not (placed and f.namespace == "work" and f.key == "employer" and _has_cjk(f.value) and is_chinese_city(f.value))]
    # "Biscuit's been howling at the back door … How do you get a beagle to sleep in?"
    if not any(f.namespace == "pet" for _, _, f in found) and (act := _PET_DOING.search(text) or _ZH_PET_DOING.search(text)) \
            and (kind := _species_in(text) or _zh_species_in(text)) and act["n"].lower() not in _NOT_NAMES \
            and not re.search(_KIN + "|" + _ZH_KIN, act["n"], re.I) and not leading_city(act["n"].lower()) \
            and (not _has_cjk(act["n"]) or could_be_a_name(act["n"])):
        found.append((0, act.start(), ExtractedFact(
            namespace="pet", key=_slug(act["n"]), value=kind, confidence=min(0.9, confidence_cap),
            evidence_message_ids=[message.message_id], observed_at=message.created_at)))
    # A sign-off asked for in quotes, said to be what one is called ("end it with 'cheers, Deeps' cos that's
    # what the whole team calls me").
    if (quoted := _QUOTED_SIGN_OFF.search(message.content)) and not any(f.namespace == "profile" for _, _, f in found) \
            and (_may_be_given_name(quoted["v"]) or _CALLS_ME.search(message.content)):
        found.append((len(text), 0, ExtractedFact(
            namespace="profile", key="name", value=quoted["v"], confidence=min(0.9, confidence_cap),
            evidence_message_ids=[message.message_id], observed_at=message.created_at)))
    signed = _SIGN_OFF.search(message.content) or _ZH_SIGN_OFF.search(message.content)
    if signed and signed.start() > 0 and not any(f.namespace == "profile" for _, _, f in found) \
            and ((signed["v"] and _may_be_given_name(signed["v"])) or (signed["z"] and could_be_a_name(signed["z"]))):
        found.append((len(text), 0, ExtractedFact(
            namespace="profile", key="name", value=signed["v"] or signed["z"], confidence=min(0.9, confidence_cap),
            evidence_message_ids=[message.message_id], observed_at=message.created_at)))
    # Two homes in one message ("I'm in Dublin, renting a place in Phibsboro"): a known city beats a
    # district or a street nobody lists as a city.
    homes = {f.value for _, _, f in found if (f.namespace, f.key, f.operation) == ("location", "home_city", "assert")}
    if len(homes) > 1 and (cities := {v for v in homes if is_chinese_city(v) or leading_city(v.lower()) == v.lower()}):
        found = [(i, at, f) for i, at, f in found
                 if not ((f.namespace, f.key, f.operation) == ("location", "home_city", "assert") and f.value not in cities)]
    named = {f.value for _, _, f in found if f.namespace == "pet" and f.key != _slug(f.value)}
    corrected = {(f.namespace, f.key) for _, _, f in found if f.operation == "correct"}
    # One job per message: a framed title (0.9) beats a bare "做X" reading (0.6) of the same message.
    best_job = max((f.confidence for _, _, f in found if f.namespace == "work" and f.key == "job"
                    and f.operation != "end"), default=0.0)
    # "we're not engaged, we're just dating": the negation is the correction's, not an end of its own.
    return [f for _, _, f in sorted(found, key=lambda t: (t[0], t[1]))
            if not (f.namespace == "pet" and f.key == _slug(f.value) and f.value in named)
            and not (f.operation == "end" and (f.namespace, f.key) in corrected)
            and not (f.namespace == "work" and f.key == "job" and f.operation != "end" and f.confidence < best_job)]
