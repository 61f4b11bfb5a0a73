"""Relations between the entities a session mentions, read by rules from the subject-role speakers'
sentences, English and Chinese.

Rules propose, the entities decide: a rule names both ends the way the entity reader names them
("sister" or "Caroline's sister" for "my sister", the given name for "my sister Mia", the place after
"moved to"), and agent_memory.core.relations.kept_relations keeps only relations whose ends are
entities of the same result (or the speaker), of the type the relation needs (a place to live in,
an organisation to work at, an event to attend).

- **Kinship and roles.** A possessive kinship or role phrase ("my sister Mia", "my mom", "my
  husband", "my friend Jo", "my boss Dana"; 我姐姐小美, 我妈妈, 我老公, 我的朋友小李) relates the speaker
  to that person; "Mia, my sister" and "Mia is my sister" too. Another person's ("Mia's husband
  Tom", 王芳的妈妈) relates that person; "her sister Lou" relates the one person the sentence names
  before it, and nobody when it names none or several.
- **Verbs of a state or a visit.** Classes of verbs, each before the entity it relates: living
  (live in, moved to, settled in; 住在, 搬到), working (work at, joined, got hired by; 在…上班/工作),
  studying, belonging, owning a pet or a possession, going to a place (visited) or an event
  (attended). The clause's subject must be the speaker (agent_memory.providers.offline.subject) or
  a person the session names; questions, hypotheticals and plans say nothing.
- **Endings.** "I left Acme", "quit my job", "moved away from Paris", "don't live in Paris anymore",
  "we broke up", 我从腾讯辞职了, 我们分手了: an "end" of that relation (target "" for whatever is
  current).

Pure and deterministic, like the rest of the offline extractor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from agent_memory.core.entities import fold
from agent_memory.core.models import EntityType, ExtractedEntity, ExtractedRelation, Message, RelationType
from agent_memory.core.relations import SUBJECT, RelationDraft, kept_relations
from agent_memory.providers.offline.entities import (
    _CAP,
    _EN_PET,
    _EN_THING,
    _ZH_KIN,
    _ZH_PET,
    _ZH_UNIQUE,
    _after_relation,
    _owned,
    _possessor,
    _speaker_name,
    _zh_given,
)
from agent_memory.providers.offline.gazetteer import is_chinese_city
from agent_memory.providers.offline.sentence import (
    _JOKE_SKIP,
    _NO_LONGER,
    _SENTENCE_SPLIT,
    _hypothetical,
    _negated,
    _prepare,
    _statement_part,
)
from agent_memory.providers.offline.subject import _ZH_THIRD, _clause_start, _subject_ok
from agent_memory.providers.offline.values import _CJK
from agent_memory.providers.offline.zh_segment import names_a_person

__all__ = ["extract_relations"]

# --- kinship and roles ------------------------------------------------------------------------

# A kinship or role word -> (relation, role). The role is English in both languages.
_EN_KIN_WORDS: dict[str, tuple[RelationType, str]] = {
    **dict.fromkeys(["mom", "mum", "mother", "mommy", "mama"], ("family", "mother")),
    **dict.fromkeys(["dad", "father", "daddy", "papa"], ("family", "father")),
    **dict.fromkeys(["grandma", "grandmother", "granny"], ("family", "grandmother")),
    **dict.fromkeys(["grandpa", "grandfather"], ("family", "grandfather")),
    **dict.fromkeys(["stepmom", "stepmother"], ("family", "stepmother")),
    **dict.fromkeys(["stepdad", "stepfather"], ("family", "stepfather")),
    **{w: ("family", w) for w in "sister brother son daughter twin cousin aunt uncle niece nephew".split()},
    **{w: ("partner", w) for w in "wife husband partner girlfriend boyfriend".split()},
    **dict.fromkeys(["fiance", "fiancé"], ("partner", "fiancé")),
    **dict.fromkeys(["fiancee", "fiancée"], ("partner", "fiancée")),
    **dict.fromkeys(["friend", "buddy", "pal"], ("friend", "friend")),
    "best friend": ("friend", "best friend"),
    **dict.fromkeys(["colleague", "coworker", "co-worker"], ("colleague", "colleague")),
    "boss": ("colleague", "boss"), "manager": ("colleague", "manager"), "mentor": ("colleague", "mentor"),
}
# Words the entity reader names a person by only together with a name ("my friend Raj").
_EN_MANY_WORDS = frozenset("friend buddy pal colleague coworker co-worker cousin aunt uncle niece nephew".split())
_EN_KIN_ALT = "|".join(sorted((re.escape(w).replace(r"\ ", r"\s+") for w in _EN_KIN_WORDS), key=len, reverse=True))
_EN_ADJ = r"(?:(?:little|big|older|younger|elder|baby|new|late|oldest|youngest)\s+)?"
_EN_GIVEN = rf"(?:,?\s+(?:(?:named|called)\s+)?(?P<given>{_CAP})\b)?"
# "my sister Mia", "our friend Jo"; "Mia's husband Tom"; "her sister Lou".
_EN_OWN_KIN = re.compile(rf"\b(?P<own>[Mm]y|[Oo]ur)\s+(?P<adj>{_EN_ADJ})(?P<kin>{_EN_KIN_ALT})\b{_EN_GIVEN}")
_EN_THEIR_KIN = re.compile(rf"(?<![\w'-])(?P<owner>{_CAP}(?:\s+{_CAP})?)'s\s+(?P<adj>{_EN_ADJ})(?P<kin>{_EN_KIN_ALT})\b"
                           rf"{_EN_GIVEN}")
_EN_PRONOUN_KIN = re.compile(rf"\b(?:[Hh]er|[Hh]is)\s+(?P<adj>{_EN_ADJ})(?P<kin>{_EN_KIN_ALT})\b{_EN_GIVEN}")
# "Mia, my sister", "Mia is my sister", "Mia's my sister".
_EN_APPOSED = re.compile(rf"(?<![\w'-])(?P<given>{_CAP})(?P<link>,\s+|\s+is\s+(?:not\s+)?|'s\s+)(?:[Mm]y|[Oo]ur)\s+"
                         rf"(?P<adj>{_EN_ADJ})(?P<kin>{_EN_KIN_ALT})\b")

_ZH_KIN_ROLES: dict[str, tuple[RelationType, str]] = {
    "妈妈": ("family", "mother"), "爸爸": ("family", "father"), "姐姐": ("family", "older sister"),
    "妹妹": ("family", "younger sister"), "哥哥": ("family", "older brother"), "弟弟": ("family", "younger brother"),
    "儿子": ("family", "son"), "女儿": ("family", "daughter"), "爷爷": ("family", "grandfather"),
    "奶奶": ("family", "grandmother"), "外公": ("family", "grandfather"), "外婆": ("family", "grandmother"),
    "姥姥": ("family", "grandmother"), "姥爷": ("family", "grandfather"), "老公": ("partner", "husband"),
    "老婆": ("partner", "wife"), "男朋友": ("partner", "boyfriend"), "女朋友": ("partner", "girlfriend"),
    "老板": ("colleague", "boss"), "领导": ("colleague", "manager"), "闺蜜": ("friend", "best friend"),
    "同事": ("colleague", "colleague"), "朋友": ("friend", "friend"), "表哥": ("family", "cousin"),
    "表姐": ("family", "cousin"), "表弟": ("family", "cousin"), "表妹": ("family", "cousin"),
    "堂哥": ("family", "cousin"), "堂姐": ("family", "cousin"), "舅舅": ("family", "uncle"),
    "叔叔": ("family", "uncle"), "阿姨": ("family", "aunt"), "姑姑": ("family", "aunt"),
}
# What may stand before a bare kinship word that is the speaker's own (妈妈说…, 我的朋友小李).
_ZH_OWN_BEFORE = re.compile(r"(?:^|[\s,.!?;:、~(\"“]|我的|我们的|我|我们|和|跟|与|陪|带)$")
_ZH_PERSON_OWNER = re.compile(rf"(?P<owner>[{_CJK}]{{2,3}})的$")

# --- verbs of a state or a visit --------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    relations: dict[EntityType, RelationType]  # by the type of the entity that follows
    operation: str = "assert"
    # An assertion negated or said to be over is an end of it; a visit that did not happen is nothing.
    negation_ends: bool = True


def _en(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"\b(?:{pattern})\s+", re.I)


_ORG: dict[EntityType, RelationType] = {"organisation": "works_at"}
_EN_RULES = (
    _Rule(_en(r"(?:live|lives|living|reside|resides|residing)\s+(?:in|at)|(?:am|'m|are|'re)\s+based\s+in"),
          {"place": "lives_in"}),
    _Rule(_en(r"(?:moved|relocated|moving)\s+(?:back\s+|over\s+|out\s+|down\s+|up\s+)?(?:to|into)|settled\s+"
              r"(?:down\s+)?in|(?:made|making)\s+(?:a\s+)?(?:new\s+)?home\s+in"), {"place": "lives_in"},
          negation_ends=False),
    _Rule(_en(r"moved\s+(?:away\s+from|out\s+of)"), {"place": "lives_in"}, "end", negation_ends=False),
    _Rule(_en(r"(?:work|works|working|employed|interning|intern|teach|teaches|teaching|lecture|lectures|lecturing)\s+"
              r"(?:at|for|with)|(?:is|'s|was|am|'m|are|'re)\s+(?:now\s+)?(?:a|an)\s+(?:[\w-]+\s+){0,2}?[\w-]+(?:er|or|ist|ian|ant|"
              r"ent|eer|nurse|chef|cook|vet|lead|head|manager|doctor|teacher|intern)\s+(?:at|for|with)"), _ORG),
    _Rule(_en(r"(?:started|starting|start)\s+"
              r"(?:working\s+|(?:a\s+)?(?:new\s+)?job\s+)?(?:at|with)|(?:got|landed|accepted|took)\s+(?:a\s+|the\s+)?"
              r"(?:new\s+)?(?:job|position|role|offer)\s+(?:at|with|from)|(?:got|was|been|were)\s+hired\s+(?:at|by)"),
          _ORG, negation_ends=False),
    _Rule(_en(r"joined"), _ORG, negation_ends=False),
    _Rule(_en(r"(?:left|quit|leaving|quitting)(?:\s+(?:my|the)\s+job\s+(?:at|with))?|resigned\s+from|retired\s+from|"
              r"(?:got|was|been)\s+(?:laid\s+off|fired|let\s+go)\s+(?:from|by)"), _ORG, "end", negation_ends=False),
    _Rule(_en(r"(?:study|studies|studying|student|enrolled|majoring\s+in\s+\w+)\s+(?:at|in)|(?:started|starting)\s+"
              r"(?:university|college|school)\s+at"), {"organisation": "studies_at"}),
    _Rule(_en(r"graduated\s+from|dropped\s+out\s+of"), {"organisation": "studies_at"}, "end", negation_ends=False),
    _Rule(_en(r"(?:am|'m|are|'re|became)\s+(?:a\s+)?members?\s+of|belong\s+to|(?:play|plays|playing)\s+for"),
          {"organisation": "member_of"}),
    _Rule(_en(r"(?:got|adopted|bought|rescued|have|has|own|owns|brought\s+home)(?:\s+(?:a|an|our|my|the))?"),
          {"pet": "owns", "thing": "owns"}),
    _Rule(_en(r"visited|visiting|(?:went|gone|been|flew|drove|traveled|travelled|came\s+back|got\s+back|returned)"
              r"\s+(?:back\s+)?(?:to|from)|(?:trip|vacation|holiday)\s+(?:to|in)|(?:stayed|spent\s+\w+(?:\s+\w+)?)"
              r"\s+in|(?:attended|celebrated)|(?:was|were)\s+at|(?:took\s+part|participated|competed|ran|performed)"
              r"\s+(?:in|at)"),
          {"place": "visited", "event": "attended"}, negation_ends=False),
)
_EN_PARTNER_END = re.compile(r"\b(?:broke\s+up|split\s+up|broken\s+up|got\s+divorced|divorced|separated|called\s+it\s+quits)"
                             r"\b(?:\s+with\s+)?", re.I)
_EN_JOB_END = re.compile(r"\b(?:quit|left|lost)\s+my\s+job\b|\b(?:got|was|been)\s+(?:laid\s+off|fired)\b|\bretired\b", re.I)
_CLUB_HEADS = re.compile(r"\b(?:Club|Society|Association|Team|League|Choir|Band|Group|Church|Union|Guild)s?\b")
_STUDY_HEADS = re.compile(r"\b(?:University|College|School|Academy|Institute)\b|大学|学院|学校|中学|小学")
# Determiners before the entity's name ("moved to the Hague" keeps "Hague" as a candidate too).
_EN_DET = re.compile(r"^(?:the|a|an|this|that|our|my)\s+", re.I)

_ZH_RULES = (
    _Rule(re.compile(r"(?:住在|住)"), {"place": "lives_in"}),
    _Rule(re.compile(r"(?:搬到了?|搬去了?|搬回了?|搬回到|搬家到|定居在?|落户在?|安家在?)"), {"place": "lives_in"},
          negation_ends=False),
    _Rule(re.compile(r"(?:搬离了?|搬出了?)"), {"place": "lives_in"}, "end", negation_ends=False),
    _Rule(re.compile(r"(?:加入了?|入职了?|进了)"), _ORG, negation_ends=False),
    _Rule(re.compile(r"(?:从|离开了?)"), _ORG, "end", negation_ends=False),  # 从X辞职 / 离开了X (checked below)
    _Rule(re.compile(r"(?:养了?(?:一只|一条|只|条)?)"), {"pet": "owns"}),
    _Rule(re.compile(r"(?<![搬回])(?:去了|去过|到了|参加了|参加过|逛了)"), {"place": "visited", "event": "attended"},
          negation_ends=False),
)
# 在X上班/工作 and 在X读书: the verb after the entity.
_ZH_AT = re.compile(rf"在(?P<v>[{_CJK}A-Za-z0-9]{{2,12}}?)(?P<verb>上班|工作|实习|任职|读书|上学|读研|读博|念书|读大学|生活)")
_ZH_AT_RELATION: dict[str, tuple[EntityType, RelationType]] = {
    **dict.fromkeys(["上班", "工作", "实习", "任职"], ("organisation", "works_at")),
    **dict.fromkeys(["读书", "上学", "读研", "读博", "念书", "读大学"], ("organisation", "studies_at")),
    "生活": ("place", "lives_in")}
_ZH_IN_CITY = re.compile(rf"(?<![去到来回从])在(?P<v>[{_CJK}]{{2,6}}?)(?=$|[,，。!！;；])")
_ZH_QUIT = re.compile(r"辞职|离职|被裁|被开除|跳槽")
_ZH_PARTNER_END = re.compile(r"分手了|离婚了|离了婚|分开了")


@dataclass
class _Names:
    """The session's entities by folded name or alias: (the name, the type)."""

    by_key: dict[str, tuple[str, EntityType]]

    @classmethod
    def of(cls, entities: Iterable[ExtractedEntity]) -> _Names:
        by_key: dict[str, tuple[str, EntityType]] = {}
        entities = list(entities)
        for e in entities:
            by_key.setdefault(fold(e.name), (e.name, e.entity_type))
        for e in entities:
            for alias in e.aliases:
                by_key.setdefault(fold(alias), (e.name, e.entity_type))
        return cls(by_key)

    def get(self, name: str) -> tuple[str, EntityType] | None:
        return self.by_key.get(fold(name))

    def en_prefix(self, rest: str, owner: str) -> tuple[str, EntityType] | None:
        """The entity the English text starts with: the longest run of its first words that is a name
        or alias, after a determiner ("the Pride Parade"; "my birthday" as the owner's)."""
        words = rest.split()[:6]
        mine = bool(words) and words[0].lower() in {"my", "our"}
        if words and _EN_DET.match(" ".join(words[:2])):
            words = words[1:]
        for n in range(len(words), 0, -1):
            phrase = re.sub(r"(?:'s)?[.,!?;:)\"]*$", "", " ".join(words[:n]))
            for candidate in ([_owned(owner, phrase.lower()), phrase] if mine else [phrase]):
                if found := self.get(candidate):
                    return found
        return None

    def zh_prefix(self, rest: str) -> tuple[str, EntityType] | None:
        """The entity the Chinese text starts with: its longest name or alias."""
        rest = re.sub(r"^(?:了|到|在|过)", "", rest)
        for n in range(min(len(rest), 16), 1, -1):
            if found := self.get(rest[:n]):
                return found
        return None


def _is_proper(name: str) -> bool:
    """A person's own name ("Melanie", 李娜), not a kinship phrase the entity reader names one by ("sister", 妈妈)."""
    if re.search(f"[{_CJK}]", name):
        return not any(name.endswith(k) for k in (*_ZH_UNIQUE.values(), *_ZH_KIN_ROLES))
    return name[:1].isupper()


def _sentences(text: str) -> list[str]:
    return [s for s in (_statement_part(p) for p in _SENTENCE_SPLIT.split(_prepare(text))) if s
            and not _JOKE_SKIP.search(s)]


class _Reader:
    """The drafts of one message: its speaker as the source, the session's entities for the targets."""

    def __init__(self, message: Message, owner: str, names: _Names):
        self.message = message
        self.owner = owner  # "" for the subject's own phrases, else the speaker's name
        self.source = owner or _speaker_name(message) or SUBJECT
        self.names = names
        self.drafts: list[RelationDraft] = []
        self.pending: list[tuple[int, RelationDraft]] = []  # the current sentence's, by where each is said

    def sentence_done(self) -> None:
        """The sentence's relations in the order it says them (an end before a new value, as said)."""
        self.drafts += [d for _, d in sorted(self.pending, key=lambda p: p[0])]
        self.pending = []

    def add(self, source: str, relation: RelationType, target: str, role: str = "", operation: str = "assert", *,
            at: int = 0) -> None:
        self.pending.append((at, RelationDraft(source=source, relation=relation, target=target, role=role,
                                         operation=operation, evidence_message_ids=[self.message.message_id],
                                         observed_at=self.message.created_at)))

    def person_before(self, sentence: str, end: int) -> str | None:
        """The one person the sentence names before `end` (an entity's name or alias), if exactly one."""
        text = fold(sentence[:end])
        found = {name for key, (name, entity_type) in self.names.by_key.items() if entity_type == "person"
                 and _is_proper(name) and re.search(rf"(?<![\w'-]){re.escape(key)}(?![\w-])", text)}
        return found.pop() if len(found) == 1 else None

    def clause_source(self, sentence: str, start: int) -> str | None:
        """Whose statement the verb at `start` is: the speaker's, or a person the clause opens with
        ("Mia lives in Leeds", "my sister moved to York", 我妈住在杭州); None for anyone else."""
        local = sentence[_clause_start(sentence, start):start].strip()
        if _subject_ok(sentence, start) or (re.match(r"\s*我", sentence) and re.fullmatch(f"[{_CJK}]*", local)
                                            and not _ZH_THIRD.search(local) and not names_a_person(local)):
            return self.source  # a Chinese sentence opened by 我 keeps it in a clause that names nobody else
        local = re.split(r"\b(?:and|but|so|because|then|while)\b", local)[-1].strip()
        local = re.sub(r"(?:\s+(?:just|also|now|still|recently|finally|has|had|have|is|was|already))+$", "", local,
                       flags=re.I)
        local = re.sub(r"(?:现在|目前|最近|刚|已经|也|还|一直)+$", "", local)
        if m := re.fullmatch(rf"(?:[Mm]y|[Oo]ur)\s+{_EN_ADJ}(?P<kin>{_EN_KIN_ALT})(?:\s+(?P<given>{_CAP}))?", local):
            return m.group("given") or _owned(self.owner, re.sub(r"\s+", " ", m.group("kin").lower()))
        if m := re.fullmatch(r"我的?(?P<kin>[\u4e00-\u9fff]{2,3})", local):
            kin = _ZH_UNIQUE.get(m.group("kin"))
            return _owned(self.owner, kin) if kin else None
        # A kinship word and the name it goes by ("老公老陈在中石化上班", "弟弟张磊在青岛"): that person.
        if (m := re.fullmatch(r"(?:我的?)?(?P<kin>[\u4e00-\u9fff]{2,3}?)(?P<given>[\u4e00-\u9fff]{2,3})", local)) \
                and (found := self.names.get(m.group("given"))) and found[1] == "person":
            return found[0]
        if local and (found := self.names.get(local)) and found[1] == "person":
            return found[0]
        return None

    # --- English ---

    def en_kin(self, s: str) -> None:
        partner_ended = bool(_EN_PARTNER_END.search(s))
        named: set[int] = set()  # "Mia, my sister": the relation is Mia's, not the unnamed sister's
        for m in _EN_APPOSED.finditer(s):
            named.add(m.end("link"))
            relation, role = _EN_KIN_WORDS[re.sub(r"\s+", " ", m.group("kin").lower())]
            if "not" in m.group("link") or "late" in m.group("adj") or not _after_relation(m.group("given")) \
                    or (relation == "partner" and partner_ended):
                continue
            self.add(self.source, relation, m.group("given"), role, at=m.start())
        for m in _EN_OWN_KIN.finditer(s):
            if m.start() not in named and not re.search(r"\b(?:not|never)\s+$", s[:m.start()], re.I):
                self._kin(m, self.source, self.owner, partner_ended)
        for m in _EN_THEIR_KIN.finditer(s):
            owner = m.group("owner")
            if (found := self.names.get(owner)) and found[1] == "person":
                self._kin(m, found[0], found[0], partner_ended)
        for m in _EN_PRONOUN_KIN.finditer(s):
            if person := self.person_before(s, m.start()):
                self._kin(m, person, person, partner_ended)

    def _kin(self, m: re.Match[str], source: str, owner: str, partner_ended: bool) -> None:
        word = re.sub(r"\s+", " ", m.group("kin").lower())
        relation, role = _EN_KIN_WORDS[word]
        if "late" in m.group("adj") or (relation == "partner" and partner_ended):
            return
        given = m.group("given")
        if given and _after_relation(given):
            self.add(source, relation, given, role, at=m.start())
        elif word not in _EN_MANY_WORDS:
            self.add(source, relation, _owned(owner, word), role, at=m.start())

    def en_pets_and_things(self, s: str) -> None:
        for m in _EN_PET.finditer(s):
            if not m.group("own"):
                continue
            given = m.group("given")
            species = re.sub(r"\s+", " ", (m.group("s") or "").lower())
            ended = re.match(r"[^.!?]{0,20}?\b(?:died|passed\s+away|passed|was\s+put\s+down|ran\s+away)\b", s[m.end():])
            self.add(self.source, "owns", given if given else _owned(self.owner, species),
                     operation="end" if ended else "assert", at=m.start())
        for m in _EN_THING.finditer(s):
            given = m.group("given")
            noun = re.sub(r"\s+", " ", m.group("noun").lower())
            self.add(self.source, "owns", given or _owned(self.owner, noun), at=m.start())

    def en_verbs(self, s: str) -> None:
        for rule in _EN_RULES:
            for m in rule.pattern.finditer(s):
                self._verb(rule, s, m.start(), m.end(), self.names.en_prefix(s[m.end():], self.owner))
        for m in _EN_PARTNER_END.finditer(s):
            if (source := self.clause_source(s, m.start())) and not _hypothetical(s, m.start()) \
                    and not _negated(s, m.start()):
                rest = s[m.end():] if m.group(0).rstrip().lower().endswith("with") else ""
                target = self._partner_named(rest)
                self.add(source, "partner", target, operation="end", at=m.start())
        for m in _EN_JOB_END.finditer(s):
            if self._said(s, m.start()) and not self.names.en_prefix(s[m.end():].removeprefix(" at "), self.owner):
                self.add(self.source, "works_at", "", operation="end", at=m.start())

    def _partner_named(self, rest: str) -> str:
        """Who a break-up names after "with": a person entity ("Tom", "my boyfriend Tom"), else ""."""
        if m := re.match(rf"\s*(?:[Mm]y|[Oo]ur)\s+{_EN_ADJ}(?:{_EN_KIN_ALT})\b(?:,?\s+(?P<given>{_CAP}))?", rest):
            rest = m.group("given") or ""
        found = self.names.en_prefix(rest, self.owner) if rest.strip() else None
        return found[0] if found and found[1] == "person" else ""

    def _said(self, s: str, start: int) -> bool:
        return _subject_ok(s, start) and not _hypothetical(s, start) and not _negated(s, start)

    def _verb(self, rule: _Rule, s: str, start: int, end: int, found: tuple[str, EntityType] | None) -> None:
        if found is None or found[1] not in rule.relations or _hypothetical(s, end):
            return
        name, entity_type = found
        relation = rule.relations[entity_type]
        if relation == "works_at" and _CLUB_HEADS.search(name):
            relation = "member_of"
        if relation == "works_at" and rule.operation == "assert" and re.match(r"\s*joined", s[start:end], re.I) \
                and _STUDY_HEADS.search(name):
            relation = "studies_at"
        source = self.clause_source(s, start)
        if source is None:
            return
        operation = rule.operation
        if operation == "assert" and (_negated(s, start) or _NO_LONGER.search(s[start:])):
            if not rule.negation_ends:
                return
            operation = "end"
        self.add(source, relation, name, operation=operation, at=start)

    # --- Chinese ---

    def zh_kin(self, s: str) -> None:
        partner_ended = bool(_ZH_PARTNER_END.search(s))
        for m in _ZH_KIN.finditer(s):
            kin = m.group("kin")
            word = _ZH_UNIQUE.get(kin, kin)
            relation, role = _ZH_KIN_ROLES.get(word, ("family", ""))
            if not role or (relation == "partner" and partner_ended):
                continue
            before = s[:m.start()]
            given = _zh_given(s[m.end():])
            if kin.startswith("我") or _ZH_OWN_BEFORE.search(before):
                source, owner = self.source, self.owner
            elif (o := _ZH_PERSON_OWNER.search(before)) and (found := self.names.get(o.group("owner"))) \
                    and found[1] == "person":
                source, owner = found[0], found[0]
            else:
                continue
            if given:
                self.add(source, relation, given, role, at=m.start())
            elif kin in _ZH_UNIQUE:
                self.add(source, relation, _owned(owner, word), role, at=m.start())

    def zh_pets(self, s: str) -> None:
        for m in _ZH_PET.finditer(s):
            given = m.group("given")
            target = self.names.zh_prefix(given) if given else None
            self.add(self.source, "owns", target[0] if target else _owned(self.owner, m.group("s")), at=m.start())

    def zh_verbs(self, s: str) -> None:
        for rule in _ZH_RULES:
            for m in rule.pattern.finditer(s):
                found = self.names.zh_prefix(s[m.end():])
                if rule.operation == "end" and found and rule.relations is _ORG:
                    after = s[m.end() + len(found[0]):][:6]
                    if m.group(0) == "从" and not _ZH_QUIT.search(after):
                        continue  # 从X来: not a leaving
                self._verb(rule, s, m.start(), m.end(), found)
        for m in _ZH_IN_CITY.finditer(s):  # "弟弟张磊在青岛，我在北京": where someone is, said as all of a clause
            found = self.names.get(m.group("v"))
            if found and found[1] == "place" and is_chinese_city(found[0]):
                self._verb(_Rule(_ZH_IN_CITY, {"place": "lives_in"}), s, m.start(), m.end(), found)
        for m in _ZH_AT.finditer(s):
            entity_type, relation = _ZH_AT_RELATION[m.group("verb")]
            found = self.names.get(m.group("v"))
            if found and found[1] == entity_type:
                self._verb(_Rule(_ZH_AT, {entity_type: relation}), s, m.start(), m.end(), found)
        if (end := _ZH_PARTNER_END.search(s)) and (source := self.clause_source(s, end.start())) \
                and not _hypothetical(s, end.start()):
            self.add(source, "partner", "", operation="end", at=end.start())
        if (quit_ := _ZH_QUIT.search(s)) and not re.search("从|离开", s[:quit_.start()]) and self._said(s, quit_.start()):
            self.add(self.source, "works_at", "", operation="end", at=quit_.start())


def extract_relations(messages: list[Message], entities: list[ExtractedEntity],
                      subject_role: str = "user") -> list[ExtractedRelation]:
    """The relations the subject-role speakers state between the session's entities (and
    themselves), checked by kept_relations, in message order."""
    shared = len({_speaker_name(m) for m in messages if m.role == subject_role} - {None}) > 1
    names = _Names.of(entities)
    drafts: list[RelationDraft] = []
    for message in messages:
        owner = _possessor(message, shared, subject_role)
        if message.role != subject_role or owner is None:
            continue
        reader = _Reader(message, owner, names)
        for sentence in _sentences(message.content):
            if re.search(f"[{_CJK}]", sentence):
                reader.zh_kin(sentence)
                reader.zh_pets(sentence)
                reader.zh_verbs(sentence)
            reader.en_kin(sentence)
            reader.en_pets_and_things(sentence)
            reader.en_verbs(sentence)
            reader.sentence_done()
        drafts += reader.drafts
    speakers = [SUBJECT, *(name for m in messages if (name := _speaker_name(m)))]
    return kept_relations(drafts, entities, speakers, message_ids=[m.message_id for m in messages])
