"""The response models a chat call is parsed into, one per task; their JSON schemas
(agent_memory.providers.openai.schema) are what the model is asked to write."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agent_memory.core.models import ENTITY_TYPES, RELATION_TYPES, ClaimType, FactOperation, Permanence

CONFIDENCE_STEPS: list[JsonValue] = [round(i / 10, 1) for i in range(11)]
ENTITY_TYPE_NAMES: list[JsonValue] = list(ENTITY_TYPES)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


class FactOut(_Strict):
    # Before the value: what the statement does decides which value is meant (an end names the
    # value that ended). Defaulted so a server without strict output may leave it out.
    operation: FactOperation = Field(default="assert", description=(
        "assert: a new fact or a new value; confirm: restates a current fact; end: a current fact is no longer "
        "true; correct: an earlier value was never true"))
    namespace: str = Field(description="one of: profile, location, travel, work, relationship, diet, preference, "
                                       "budget, pet (another short lowercase word only if none fits)")
    key: str = Field(description="snake_case key: name, home_city, trip_city, employer, job, status, restriction, "
                                 "spicy, allergy_<food>, the object of a preference, the budget's purpose, the pet's "
                                 "name")
    value: str = Field(description="the value, short, in the language of the conversation; for end the value that "
                                   "ended; for correct the right value")
    claim_type: ClaimType = Field(description="explicit: the subject said it; inference: concluded from what was said")
    permanence: Permanence
    valid_until: datetime | None = Field(description="ISO 8601 end of a temporary fact, resolved from the message "
                                                     "time; null when unknown or permanent")
    # In tenths in the schema: a grammar-constrained server (llama.cpp) enforces an enum, not a range.
    confidence: float = Field(ge=0.0, le=1.0, json_schema_extra={"enum": CONFIDENCE_STEPS})
    evidence_message_ids: list[str] = Field(min_length=1, json_schema_extra={"maxItems": 4},
                                            description="ids of the messages that state the fact")
    observed_at: datetime | None = Field(description="ISO 8601 time of the evidence message")


class EntityOut(_Strict):
    name: str = Field(description="the fullest form of the name the conversation uses, as written")
    # Any string parses (one the model got wrong is dropped, not the answer); the schema offers the types.
    entity_type: str = Field(json_schema_extra={"enum": ENTITY_TYPE_NAMES})
    # Defaulted so a server without strict output may leave it out.
    aliases: list[str] = Field(default_factory=list, json_schema_extra={"maxItems": 4},
                               description="other forms the conversation uses for the same one")
    # Not required by the parse either: an entity without known evidence is dropped, not the answer.
    evidence_message_ids: list[str] = Field(json_schema_extra={"minItems": 1, "maxItems": 4},
                                            description="ids of the messages that mention it")


RELATION_TYPE_NAMES: list[JsonValue] = list(RELATION_TYPES)


class RelationOut(_Strict):
    source: str = Field(description='an entity\'s name, or the speaker\'s name ("subject" when the speaker has none)')
    # Any string parses (one the model got wrong is dropped, not the answer); the schema offers the types.
    relation: str = Field(json_schema_extra={"enum": RELATION_TYPE_NAMES})
    target: str = Field(description="an entity's name; \"\" only to end whatever is current")
    # Defaulted so a server without strict output may leave them out.
    role: str = Field(default="", description="the role within the type, in English: sister, mother, husband, "
                                              "manager; \"\" when none")
    operation: str = Field(default="assert", json_schema_extra={"enum": ["assert", "end"]})
    evidence_message_ids: list[str] = Field(json_schema_extra={"minItems": 1, "maxItems": 4},
                                            description="ids of the messages that state it")


class ExtractionOut(_Strict):
    facts: list[FactOut] = Field(json_schema_extra={"maxItems": 10})
    # Defaulted so a server without strict output may answer with the facts alone.
    entities: list[EntityOut] = Field(default_factory=list, json_schema_extra={"maxItems": 12})
    relations: list[RelationOut] = Field(default_factory=list, json_schema_extra={"maxItems": 8})


class ImportanceOut(_Strict):
    importance: int = Field(ge=1, le=10)
    rationale: str


class SentenceOut(_Strict):
    # The citations first: a model decodes in the schema's order, so a sentence cut off inside its
    # text at max_tokens still names its evidence, and the text's complete sentences can be kept.
    source_message_ids: list[str] = Field(min_length=1, json_schema_extra={"maxItems": 4})
    text: str


class SummaryOut(_Strict):
    sentences: list[SentenceOut] = Field(json_schema_extra={"maxItems": 6})
