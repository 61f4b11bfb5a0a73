"""What a message does to the facts already known: every pet of a species said to be gone ends, a
known pet's death ends it, stopping the activity that is one's job ends the job, and "that"
resolves to the known object the message names."""

from __future__ import annotations

import re

from agent_memory.core.models import ExtractedFact, KnownFact, Message
from agent_memory.providers.offline.lexicon import _EN_SPECIES, _ZH_SPECIES, _species
from agent_memory.providers.offline.sentence import _hypothetical
from agent_memory.providers.offline.values import _slug

_NO_MORE_PETS = re.compile(r"(?:没有|不养|不再养|没养)(?:了)?(?:" + _ZH_SPECIES.replace("?P<s>", "?P<z>") + r")了|"
                           r"\bnever\s+got\s+(?:that|the|our|a)\s+" + _EN_SPECIES.replace("?P<s>", "?P<s2>") + r"\b|"
                           r"\b(?:don't|do\s+not|no\s+longer)\s+(?:have|own|keep)\s+(?:a|an|any)\s+"
                           + _EN_SPECIES + r"\s+(?:anymore|any\s+more|now)\b", re.I)


def _species_gone(text: str, known: list[ExtractedFact | KnownFact], message: Message) -> list[ExtractedFact]:
    """"我现在没有猫了", "we don't have a dog anymore": every current pet of that species ends."""
    m = _NO_MORE_PETS.search(text)
    if not m or _hypothetical(text, m.start()):
        return []
    species = _species(m.group("z") or m.group("s") or m.group("s2"))
    names = dict.fromkeys(f.key for f in known if f.namespace == "pet" and f.value == species)
    return [ExtractedFact(namespace="pet", key=name, value="", operation="end", confidence=0.9,
                          evidence_message_ids=[message.message_id], observed_at=message.created_at)
            for name in names]


_DEMONSTRATIVE = re.compile(r"^(?:那|这|它|那个|这个|那种|这种|那玩意儿?|it|that|this|them|those)(?:_|$|[\u4e00-\u9fff]{0,3}$)")


def _resolve_demonstratives(facts: list[ExtractedFact], text: str,
                            known: list[ExtractedFact | KnownFact]) -> list[ExtractedFact]:
    """"上次吃完榴莲拉了两天肚子，现在闻到那味儿就想吐": a taste for "that" is a taste for the
    known object the message names; with none named, a demonstrative is no object at all."""
    out = []
    for fact in facts:
        if fact.namespace == "preference" and _DEMONSTRATIVE.match(fact.key):
            named = [f.key for f in known if f.namespace == "preference" and f.key.replace("_", " ") in text.lower()]
            if not named:
                continue
            fact = fact.model_copy(update={"key": named[-1]})
        out.append(fact)
    return out


_PET_GONE = re.compile(r"\b(?:let|letting)\s+(?P<a>[\w'-]+)\s+go\b|\bput\s+(?P<b>[\w'-]+)\s+(?:down|to\s+sleep)\b|"
                       r"\b(?P<c>[\w'-]+)\s+(?:passed\s+away|died|passed|crossed\s+the\s+rainbow\s+bridge|didn't\s+make\s+it)\b|"
                       r"(?P<z>[\u4e00-\u9fff]{1,4})(?:昨天|前天|今天|上周|前几天)?(?:去世了|死了|走了|没了|去喵星了|去汪星了|当天使了)", re.I)


def _known_pet_gone(text: str, facts: list[ExtractedFact], known: list[ExtractedFact | KnownFact],
                    message: Message) -> list[ExtractedFact]:
    """"we had to let smokey go": a death said of a pet already known, whatever its case."""
    pets = {f.key for f in known if f.namespace == "pet" and f.value}
    said = {f.key for f in facts if f.namespace == "pet"}
    out = []
    for m in _PET_GONE.finditer(text):
        name = _slug(m["a"] or m["b"] or m["c"] or m["z"] or "")
        if name in pets and name not in said and not _hypothetical(text, m.start()):
            out.append(ExtractedFact(namespace="pet", key=name, value="", operation="end", confidence=0.9,
                                     evidence_message_ids=[message.message_id], observed_at=message.created_at))
            said.add(name)
    return out


def _activity_ends_job(facts: list[ExtractedFact], known: list[ExtractedFact | KnownFact],
                       message: Message) -> list[ExtractedFact]:
    """Stopping the activity that is one's job ends the job ("quit bartending" while a bartender):
    the activity and the title share their stem."""
    jobs = [f.value for f in known if f.namespace == "work" and f.key == "job" and f.value]
    if not jobs:
        return []
    stem = re.sub(r"[^a-z]", "", jobs[-1].split()[-1].lower())[:5]
    for fact in facts:
        if fact.namespace == "preference" and fact.operation == "end" and len(stem) == 5 \
                and fact.key.replace("_", "").startswith(stem):
            return [ExtractedFact(namespace="work", key="job", value="", operation="end", confidence=fact.confidence,
                                  evidence_message_ids=[message.message_id], observed_at=fact.observed_at)]
    return []


_IS_SPECIES = re.compile(r"^(?:\s*(?:其实|实际上|原来|本来|明明|is|'s|was)?\s*)*(?:是|is\s+|'s\s+)?(?:actually\s+|really\s+)?"
                         r"(?:(?:一)?只|(?:a|an)\s+)?(?:" + _ZH_SPECIES.replace("?P<s>", "?P<z>") + "|" + _EN_SPECIES + r")",
                         re.I)


def _known_pet_species(text: str, facts: list[ExtractedFact], known: list[ExtractedFact | KnownFact],
                       message: Message, *, correcting: bool) -> list[ExtractedFact]:
    """A known pet named with its species ("豆豆其实是只猫", "Mochi is actually a rabbit"): its species;
    in a message that corrects an earlier one, the earlier species was never true."""
    pets = {f.key: f.value for f in known if f.namespace == "pet" and f.value}
    said = {f.key for f in facts if f.namespace == "pet"}
    out = []
    for name, species in pets.items():
        at = text.lower().find(name.replace("_", " "))
        if at < 0 or name in said or _hypothetical(text, at):
            continue
        if (m := _IS_SPECIES.match(text[at + len(name):])) and (new := _species(m.group("z") or m.group("s"))) != species:
            out.append(ExtractedFact(namespace="pet", key=name, value=new, operation="correct" if correcting else "assert",
                                     confidence=0.9, evidence_message_ids=[message.message_id],
                                     observed_at=message.created_at))
    return out
