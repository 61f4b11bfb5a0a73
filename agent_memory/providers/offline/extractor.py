"""Rule-based fact extraction for the offline provider, English and Chinese.

The extractor works sentence by sentence and clause by clause:

- **Subject.** A rule does not need "I"/"我": a match counts when the words before it in its
  clause are first-person pronouns, adverbs, time words or interjections ("Just moved to …",
  "We live in …", "Finally settled in …", "刚搬到成都", "我们住在苏州"). A third party named before
  it in the sentence ("my brother's budget", "my friend Raj lives in …", "我妈喜欢…") keeps the
  clause out, and so does a subjectless clause that continues that third party's sentence
  ("… and works at Infosys").
- **Verb classes.** Rules are written over classes of verbs and nouns (moving, moving back,
  settling; raising/lowering an amount; starting at, being hired by, leaving an employer;
  agentive job nouns rather than a fixed list; kinship words for relationship status).
- **Operations.** A statement asserts a value; "no longer"/"not … anymore"/不再/不…了, a
  negated current-fact statement, leaving a job, quitting a habit and a pet's death END the fact;
  a message that corrects an earlier one ("I meant", "I misspoke", 说错了, 记错了) turns its
  statements into CORRECT operations.
- **Time.** The change is dated by the relative time it names ("last weekend", 大前天, "since
  Saturday", "for six years" for how long a state has held); an n-day stay covers n days. The
  times are read by agent_memory.core.timeexpr, the one date parser.
- **Dialogue.** A user's bare answer to the assistant's question ("Which team?" → "The Minnesota
  Wolves!") fills the slot the question asked for.
- **Speakers.** When several named speakers share the user's role (a shared seat), only the
  account holder's messages state facts (agent_memory.core.seat); another speaker's own statements
  give their edges (`relations.py`), and the values no edge holds are counted as withheld.

Where each part lives, in this package:

- `rules/`: the rule table by topic (diet, preferences, trips, homes, relationships, names, work,
  pets, budgets), in priority order; `rules/base.py` has the rule record and the value patterns.
- `statements.py` applies the rules to one sentence, `messages.py` to one message (plus what spans
  its sentences); this module merges a session's messages into one list of facts.
- `subject.py` (whose statement it is), `sentence.py` (questions, hedges, negations, jokes),
  `values.py` (a captured phrase trimmed to its value), `lexicon.py` (word lists mapped onto the
  vocabulary), `timing.py` (when it happened).
- `corrections.py` (corrections of earlier statements), `known.py` (what a message does to the facts
  already known), `dialogue.py` (bare answers to the assistant's questions).
- `entities.py`: the people, pets, places, organisations, events and things the session mentions,
  from every message whoever said it; they sit beside the facts and never change them.
- `relations.py`: the relations the subject-role speakers state between those entities and
  themselves ("my sister Mia", "I moved to Lisbon", 我在腾讯上班), kept only between entities of the
  same result (agent_memory.core.relations).

Keys follow the vocabulary in docs/recall.md ("What gets written") and tools/evaluation/data/PHRASING.md:
`preference/<object>` = like|dislike, `pet/<name>` = species, `relationship/status`,
`budget/<canonical purpose>`.

Pure stdlib and deterministic (no randomness, no salted hash()), so a replayed activity gets
byte-identical results.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

from agent_memory.core.entities import fold
from agent_memory.core.fact_text import normalise_value
from agent_memory.core.models import ExtractedFact, ExtractedRelation, ExtractionResult, KnownFact, Message
from agent_memory.core.seat import ANOTHER_SPEAKER, holds_seat, session_holder, speaker_key
from agent_memory.providers.offline.corrections import _CONTRAST, _CORRECTION, _MEANT, _contrast_corrections
from agent_memory.providers.offline.dialogue import _answer_facts
from agent_memory.providers.offline.entities import extract_entities
from agent_memory.providers.offline.known import (
    _activity_ends_job,
    _known_pet_gone,
    _known_pet_species,
    _resolve_demonstratives,
    _species_gone,
)
from agent_memory.providers.offline.messages import _message_facts
from agent_memory.providers.offline.relations import extract_relations
from agent_memory.providers.offline.sentence import _prepare
from agent_memory.providers.offline.statements import is_past_state
from agent_memory.providers.offline.values import _slug

_POLARITIES = frozenset({"like", "dislike"})  # a changed taste is one key whose value flips


def _extract_facts(messages: list[Message], subject_role: str,
                   known: list[KnownFact] | None = None,
                   reads: Callable[[Message], bool] | None = None) -> list[ExtractedFact]:
    """The facts the subject-role messages state, merged; with `reads` (a shared seat:
    agent_memory.core.seat) only the messages it picks, the other speakers' being another party's."""
    merged: dict[tuple[str, str, bool], ExtractedFact] = {}  # (namespace, key, is_end)
    order: dict[tuple[str, str, bool], int] = {}
    states: list[tuple[int, ExtractedFact]] = []  # earlier states of a fact, in the order said
    previous: Message | None = None
    earlier: list[str] = []
    for n, message in enumerate(messages):
        if message.role != subject_role or (reads is not None and not reads(message)):
            previous = message
            continue
        facts = _message_facts(message)
        text = _prepare(message.content)
        if _CORRECTION.search(text) or _MEANT.search(text) or re.search(r"\bnot\b|不是", text) or _CONTRAST.search(text):
            facts += _contrast_corrections(text, message, [*(known or []), *merged.values()], facts)
        facts = _resolve_demonstratives(facts, text, [*(known or []), *merged.values()])
        facts += _activity_ends_job(facts, [*(known or []), *merged.values()], message)
        facts += _species_gone(text, [*(known or []), *merged.values()], message)
        facts += _known_pet_gone(text, facts, [*(known or []), *merged.values()], message)
        facts += _known_pet_species(text, facts, [*(known or []), *merged.values()], message,
                                    correcting=bool(_CORRECTION.search(text) or _MEANT.search(text)))
        if not facts and previous is not None and previous.role != subject_role:
            facts = _answer_facts(_prepare(previous.content), message.content, earlier, message)
            for fact in facts:  # the pets are named now: drop their species-keyed placeholders
                if fact.namespace == "pet":
                    merged.pop(("pet", _slug(fact.value), False), None)
        earlier.append(_prepare(message.content))
        previous = message
        for fact in facts:
            if is_past_state(fact):
                present: list[KnownFact | ExtractedFact] = [*(known or []), *(f for f in merged.values() if not is_past_state(f))]
                placed = _past_against_present(fact, present)
                if placed is None:
                    continue
                fact = placed
            is_end = fact.operation == "end"
            identity = (fact.namespace, fact.key, is_end)
            opposite = (fact.namespace, fact.key, not is_end)
            if opposite in merged:
                other = merged[opposite]
                # A later statement cancels the opposite one with the same value (or about whatever
                # is current); an end and a new value of the same key both stand ("left Ikea,
                # started at H&M").
                if not fact.value or not other.value or other.value == fact.value:
                    del merged[opposite]
            if identity in merged and _succeeds(merged[identity], fact):
                # Another state of the same thing, said later ("住在上海…后来搬到了北京"): the earlier
                # one stays, as a state that held until this one.
                state = merged.pop(identity)
                if state.observed_at >= fact.observed_at:  # both said in one message: it held just before
                    state = state.model_copy(update={"observed_at": fact.observed_at - _BEFORE})
                position = order.pop(identity)
                if not _holds(state, known or []):  # the current value needs no restating before its successor
                    states.append((position, state))
            elif identity in merged:
                # The last statement wins, but every message that said it stays as evidence.
                earlier_ids = merged.pop(identity).evidence_message_ids
                ids = earlier_ids + [i for i in fact.evidence_message_ids if i not in earlier_ids]
                fact = fact.model_copy(update={"evidence_message_ids": ids})
            merged[identity] = fact
            # Ends go before the new values of the same message, so the old fact closes first.
            order[identity] = n * 1000 + len(order) - (500 if is_end else 0)
    ordered = [*states, *((order[(f.namespace, f.key, f.operation == "end")], f) for f in merged.values())]
    return [fact for _, fact in sorted(ordered, key=lambda pair: pair[0])]


# An earlier state said in the same message as the one that followed it holds until just before it.
_BEFORE = timedelta(seconds=1)


def _past_against_present(fact: ExtractedFact, present: list[KnownFact | ExtractedFact]) -> ExtractedFact | None:
    """A state said to have held before, against what holds now: the current value itself ended
    ("I used to live in Paris" while Paris is current); another current value stays, and the past
    one, which cannot be placed before it, is left out; with nothing current it is a closed interval."""
    now = next((f for f in reversed(present) if (f.namespace, f.key) == (fact.namespace, fact.key)), None)
    if now is None:
        return fact
    if normalise_value(now.value) != normalise_value(fact.value):
        return None
    assert fact.valid_until is not None  # a past state ends when it is said
    return fact.model_copy(update={"operation": "end", "observed_at": fact.valid_until, "valid_until": None})


def _holds(fact: ExtractedFact, known: list[KnownFact]) -> bool:
    """Whether the fact's value is the current one already."""
    return any((k.namespace, k.key) == (fact.namespace, fact.key) and normalise_value(k.value) == normalise_value(fact.value)
               for k in known)


def _succeeds(earlier: ExtractedFact, later: ExtractedFact) -> bool:
    """Whether `later` is a new state of a permanent fact after `earlier` (a move, a new job), not
    a restatement of it or a correction of a slip. A temporary fact (a stay) ends by itself."""
    if earlier.evidence_message_ids == later.evidence_message_ids and not is_past_state(earlier):
        return False  # two values in one message, neither in the past: the later one says it
    return (earlier.operation == later.operation == "assert" and earlier.permanence == later.permanence == "permanent"
            and normalise_value(earlier.value) != normalise_value(later.value) and earlier.value not in _POLARITIES
            and earlier.observed_at <= later.observed_at)


class RuleFactExtractor:
    """The rule extractor under the FactExtractor protocol. It reads the current facts only to find
    the slot of a correction that names the wrong value ("it's Globex, not Initech") and to end every
    pet of a species said to be gone; everything else is read from the statements. The entities come
    from every message, whoever said it (`entities.py`); they do not change the facts."""

    name = "rule-extractor"
    runs_in_worker = True  # computed in this process: its steps run as local activities
    # 3: clause-level subject analysis, verb classes, operations (end/correct), PHRASING vocabulary
    # 4: verb classes for moves/jobs/relationships, generic money limits, dropped subjects,
    #    contrast corrections against the current facts
    # 5: given names, signatures, respellings, a key corrected (void + the right key), breeds, pronouns,
    #    stays by length, intent hedging its own clause in Chinese
    # 7: the people, pets, places, organisations, events and things the session mentions (entities)
    # 8: the relations between them (kinship, partners, friends, colleagues, work, study, home, pets, visits)
    # 9: coordinated items, from → to changes, past states, several states in order, languages,
    #    third parties' edges, corrections by contrast across word orders
    # 10: no fact from what names no thing (a time, a manner, a pronoun, a lone gerund, a function word
    #     as a town, a causative as a title); a hyphen joins a coordinated item's word
    # 11: the shared seat: with several named speakers in the user's role only the account holder's
    #     statements are the subject's facts; another speaker's own edges start from their person
    version = "11"

    async def extract(self, messages: list[Message], *, subject_role: str = "user",
                      current_facts: list[KnownFact] | None = None) -> ExtractionResult:
        holder = session_holder(messages, subject_role, current_facts)
        entities = extract_entities(messages, subject_role, holder)
        relations = extract_relations(messages, entities, subject_role, holder)
        facts = _extract_facts(messages, subject_role, current_facts,
                               None if holder is None else (lambda m: holds_seat(m, holder)))
        others = _others_facts(messages, subject_role, holder, relations)
        return ExtractionResult(provider=self.name, extractor=self.name, extractor_version=self.version,
                                facts=facts, entities=entities, relations=relations,
                                withheld={ANOTHER_SPEAKER: others} if others else {})


# The relation that holds a fact of the same meaning, when another speaker states it of themselves.
_HELD_BY: dict[tuple[str, str], str] = {("location", "home_city"): "lives_in", ("work", "employer"): "works_at",
                                         ("relationship", "status"): "partner"}


def _others_facts(messages: list[Message], subject_role: str, holder: str | None,
                  relations: list[ExtractedRelation]) -> int:
    """How many values the other speakers of a shared seat state about themselves that none of
    their relations holds (a diet, an allergy, a job title): never the subject's facts."""
    if holder is None:
        return 0
    count = 0
    others = dict.fromkeys(key for m in messages if m.role == subject_role
                           and (key := speaker_key(m)) not in (None, holder))
    for other in others:
        edges = {(r.relation, i) for r in relations if fold(r.source) == other for i in r.evidence_message_ids}

        def theirs(message: Message, who: str = other) -> bool:
            return speaker_key(message) == who

        for fact in _extract_facts(messages, subject_role, None, theirs):
            held = _HELD_BY.get((fact.namespace, fact.key)) or ("owns" if fact.namespace == "pet" else None)
            if fact.operation != "end" and not any((held, i) in edges for i in fact.evidence_message_ids):
                count += 1
    return count
