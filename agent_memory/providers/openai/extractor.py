"""Fact, entity and relation extraction by a chat model, its output checked against the input:
a fact citing an unknown message id is dropped, an entity or a relation keeps only known ids and
is dropped when none is left."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime

from agent_memory.core.entities import merged_entities
from agent_memory.core.models import (
    ENTITY_TYPES,
    EntityType,
    ExtractedEntity,
    ExtractedFact,
    ExtractedRelation,
    ExtractionResult,
    KnownFact,
    Message,
)
from agent_memory.core.relations import SUBJECT, RelationDraft, kept_relations
from agent_memory.core.seat import holds_seat, session_holder, speaker_key
from agent_memory.providers.openai.chat import ChatProvider
from agent_memory.providers.openai.prompts import (
    EXTRACTION_PROMPT,
    FACTS_TOKEN_BUDGET,
    render_current_facts,
    render_holder,
    render_transcript,
)
from agent_memory.providers.openai.responses import EntityOut, ExtractionOut, FactOut, RelationOut
from agent_memory.providers.openai.schema import bounded_schema, cited_schema, strict_json_schema
from agent_memory.providers.openai.usage import Usage, merged_usage, with_cost

log = logging.getLogger(__name__)


def _aligned(value: datetime | None, reference: datetime) -> datetime | None:
    """A model-given time with the reference's awareness (naive times are read in its zone)."""
    if value is None:
        return None
    if reference.tzinfo is not None and value.tzinfo is None:
        return value.replace(tzinfo=reference.tzinfo)
    if reference.tzinfo is None and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


# The entity types as a model may spell them (American English, plural).
_ENTITY_TYPE_SPELLINGS: dict[str, EntityType] = {
    **{t: t for t in ENTITY_TYPES}, **{f"{t}s": t for t in ENTITY_TYPES}, "people": "person",
    "organization": "organisation", "organizations": "organisation"}


class OpenAICompatibleExtractor(ChatProvider):
    task = "extractor"

    async def extract(self, messages: list[Message], *, subject_role: str = "user",
                      current_facts: list[KnownFact] | None = None) -> ExtractionResult:
        system = EXTRACTION_PROMPT.format(role=subject_role)
        schema = bounded_schema(strict_json_schema(ExtractionOut), facts=self.config.max_facts,
                                entities=self.config.max_entities, relations=self.config.max_relations,
                                evidence_message_ids=self.config.max_citations)
        # The facts take at most a quarter of a chunk's prompt in a small window, the rest stays the conversation's.
        window = self._data_budget(0.25)
        known = render_current_facts(current_facts, token_budget=min(FACTS_TOKEN_BUDGET, window)
                                     if window is not None else FACTS_TOKEN_BUDGET)
        # A shared seat (agent_memory.core.seat): the model is told whose statements are facts.
        holder = session_holder(messages, subject_role, current_facts)
        known += render_holder(next((m.speaker for m in messages if m.speaker and speaker_key(m) == holder), None))
        found: list[FactOut] = []
        mentioned: list[EntityOut] = []
        related: list[RelationOut] = []
        usages: list[Usage] = []
        for chunk in self._chunks(system, messages, ExtractionOut, known):  # one chunk unless the session is long
            out, chunk_usage = await self._complete(
                system, render_transcript(chunk), ExtractionOut, "fact_extraction",
                cited_schema(schema, "evidence_message_ids", chunk, self.config.cite_from_enum), preamble=known)
            found.extend(out.facts)
            mentioned.extend(out.entities)
            related.extend(out.relations)
            usages.append(chunk_usage)
        usage = merged_usage(usages)
        facts = self._checked_facts(found, messages, subject_role, holder)
        entities = self._checked_entities(mentioned, messages)
        return with_cost(ExtractionResult, usage.cost_usd, provider=usage.provider,
                         provider_request_id=usage.request_id, input_tokens=usage.input_tokens,
                         output_tokens=usage.output_tokens, extractor=self.name, extractor_version=self.version,
                         facts=facts, entities=entities,
                         relations=self._checked_relations(related, entities, messages))

    @staticmethod
    def _checked_relations(relations: list[RelationOut], entities: list[ExtractedEntity],
                           messages: list[Message]) -> list[ExtractedRelation]:
        """What the model related, through the same check as the offline extractor's relations
        (agent_memory.core.relations): both ends entities of this result or a speaker, known
        evidence only, each relation once. A relation is observed at its latest evidence message."""
        by_id = {m.message_id: m for m in messages}
        drafts: list[RelationDraft] = []
        for relation in relations:
            cited = [by_id[i.strip()] for i in relation.evidence_message_ids if i.strip() in by_id]
            if not cited:
                log.info("dropping an extracted relation citing unknown message ids")
                continue
            drafts.append(RelationDraft(
                source=relation.source, relation=re.sub(r"[\s-]+", "_", relation.relation.strip().casefold()),
                target=relation.target, role=relation.role, operation=relation.operation.strip().casefold(),
                evidence_message_ids=[m.message_id for m in cited],
                observed_at=max(m.created_at for m in cited)))
        speakers = [SUBJECT, *(m.speaker for m in messages if m.speaker)]
        return kept_relations(drafts, entities, speakers, message_ids=list(by_id))

    @staticmethod
    def _checked_entities(entities: list[EntityOut], messages: list[Message]) -> list[ExtractedEntity]:
        """What the model named, whoever said it, as storable entities: of a known type, citing only
        known messages (an entity left without any is dropped), names within the bounds, the same
        entity found in several chunks (or named two ways) merged into one."""
        typed: list[tuple[str, EntityType, list[str], list[str]]] = []
        for entity in entities:
            entity_type = _ENTITY_TYPE_SPELLINGS.get(entity.entity_type.strip().casefold())
            if entity_type is None:
                log.info("dropping an extracted entity of an unknown type")
                continue
            typed.append((entity.name, entity_type, entity.aliases, entity.evidence_message_ids))
        return merged_entities(typed, [m.message_id for m in messages])

    @staticmethod
    def _checked_facts(facts: list[FactOut], messages: list[Message], subject_role: str,
                       holder: str | None = None) -> list[ExtractedFact]:
        by_id = {m.message_id: m for m in messages}
        first, last = min(m.created_at for m in messages), max(m.created_at for m in messages)
        kept: list[ExtractedFact] = []
        seen: set[tuple[str, str, str, str]] = set()
        for fact in facts:
            ids = list(dict.fromkeys(i.strip() for i in fact.evidence_message_ids))
            if not ids or any(i not in by_id for i in ids):
                log.info("dropping an extracted fact citing unknown message ids")
                continue
            evidence = [by_id[i] for i in ids]
            if not any(m.role == subject_role and holds_seat(m, holder) for m in evidence):
                # Another speaker sharing the account is not the subject either.
                log.info("dropping an extracted fact without evidence from the subject")
                continue
            latest = max(evidence, key=lambda m: m.created_at).created_at
            observed = _aligned(fact.observed_at, latest)
            if observed is None or not (first <= observed <= last):
                observed = latest  # a time outside the conversation is not an observation time
            valid_until = _aligned(fact.valid_until, latest) if fact.permanence != "permanent" else None
            if valid_until is not None and valid_until <= observed:
                valid_until = None
            namespace = re.sub(r"\W+", "_", fact.namespace.strip().lower()).strip("_")
            key = re.sub(r"\W+", "_", fact.key.strip().lower()).strip("_")[:60]
            value = fact.value.strip()
            if fact.operation == "end":
                valid_until = None  # an end has no value that could last
            # An end may leave the value empty ("whatever is current"); any other operation needs one.
            if not namespace or not key or (not value and fact.operation != "end") \
                    or (fact.operation, namespace, key, value) in seen:
                continue  # empty, or said again in a later chunk
            seen.add((fact.operation, namespace, key, value))
            kept.append(ExtractedFact(namespace=namespace, key=key, value=value, operation=fact.operation,
                                      claim_type=fact.claim_type, permanence=fact.permanence,
                                      valid_until=valid_until, confidence=fact.confidence,
                                      evidence_message_ids=ids, observed_at=observed))
        return kept
