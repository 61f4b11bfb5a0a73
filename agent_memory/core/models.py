"""Domain models shared by the store, the providers, activities and workflows.

Workflow and activity payloads carry ids and references only (the 2 MB history limit):
transcripts, extracted facts and vectors live in Postgres and are fetched by activities.
"""

from __future__ import annotations

import base64
import math
import re
import struct
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar, overload

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    computed_field,
    field_serializer,
    field_validator,
)
from pydantic_core import PydanticCustomError

from agent_memory.core.errors import InvalidInput
from agent_memory.core.projection_models import ProjectorBatchOutcome
from agent_memory.core.run_inputs import RunInput

# Tenants and subjects appear in workflow ids, Redis keys and search attributes, so their
# alphabet is restricted; the error names the rule.
IDENTIFIER_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}\Z")  # \Z: "$" would allow a final newline
IDENTIFIER_RULE = "1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit"
# The rule as a JSON schema pattern ("$": JSON schema regexes have no "\Z"), for the contracts;
# check_identifier applies the rule itself.
IDENTIFIER_SCHEMA_PATTERN = IDENTIFIER_PATTERN.pattern.replace("\\Z", "$")
IDENTIFIER_MAX_CHARS = 64
# Text shown to people (ids, names): no control characters (C0, DEL, C1), which would forge or
# garble what an operator reads (printable_id applies it); the same rule as a JSON schema pattern.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
PRINTABLE_SCHEMA_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"
# A name that is more than spaces, in printable characters.
NAME_SCHEMA_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
# Stored text: PostgreSQL's text holds no NUL (storable_text); a reason or a word is also more
# than spaces, and a word is on one line.
STORABLE_SCHEMA_PATTERN = r"^[^\x00]*$"
NOT_BLANK_SCHEMA_PATTERN = r"^[^\x00]*[^\s\x00][^\x00]*$"
ONE_LINE_SCHEMA_PATTERN = r"^[^\n\r\t\x00]*[^\s\x00][^\n\r\t\x00]*$"


def is_printable_name(value: str) -> bool:
    """A name as NAME_SCHEMA_PATTERN describes it: printable, and more than spaces."""
    return bool(value.strip()) and CONTROL_CHARACTERS.search(value) is None


def check_identifier(field: str, value: str) -> str:
    if not isinstance(value, str) or not IDENTIFIER_PATTERN.match(value):
        raise InvalidInput(f"{field} {value!r} is invalid: use {IDENTIFIER_RULE}")
    return value


ModelT = TypeVar("ModelT", bound=BaseModel)


def validated(model: type[ModelT], fields: Mapping[str, object]) -> ModelT:
    """`model` from a surface's arguments; a bad one is InvalidInput naming the field (its first
    error), never pydantic's multi-line report."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        reason = str(error.get("ctx", {}).get("error") or error["msg"])
        where = ".".join(str(part) for part in error["loc"])
        raise InvalidInput(f"{where}: {reason}" if where else reason) from None


def check_metadata(field: str, value: dict[str, Any]) -> dict[str, Any]:
    """Metadata keys are identifiers; values are short scalars (no NUL: PostgreSQL's JSON refuses it)."""
    for key, item in value.items():
        if not IDENTIFIER_PATTERN.match(key):
            raise InvalidInput(f"{field} key {key[:40]!r} is invalid: use {IDENTIFIER_RULE}")
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput(f"{field}.{key} is invalid: use a finite number")
        if isinstance(item, str) and (len(item) > METADATA_VALUE_MAX_CHARS or "\x00" in item):
            raise InvalidInput(f"{field}.{key} is invalid: use at most {METADATA_VALUE_MAX_CHARS} characters, "
                               "no NUL")
    return value


def check_session_id(value: str) -> str:
    """The rule of Session.session_id, for a session named outside a Session."""
    if not isinstance(value, str) or not 1 <= len(value) <= SESSION_ID_MAX_CHARS:
        raise InvalidInput(f"session {str(value)[:40]!r} is invalid: use 1 to {SESSION_ID_MAX_CHARS} characters")
    return printable_id("session_id", storable_text(value))


class Scope(BaseModel):
    """Who a piece of memory belongs to."""

    tenant_id: str
    subject_id: str

    @field_validator("tenant_id")
    @classmethod
    def _tenant(cls, v: str) -> str:
        return check_identifier("tenant", v)

    @field_validator("subject_id")
    @classmethod
    def _subject(cls, v: str) -> str:
        return check_identifier("subject", v)


# A time given as data (a request body, a query) is an ISO 8601 string. Pydantic alone would also
# read a number, or a string of digits, as seconds since 1970: `as_of: 0` would silently mean 1970.
_ISO_DATE_START = re.compile(r"\d{4}-\d{2}-\d{2}")


def _iso_time(value: Any) -> Any:
    if isinstance(value, datetime) or (isinstance(value, str) and _ISO_DATE_START.match(value)):
        return value
    raise PydanticCustomError("iso_datetime", "use an ISO 8601 date-time string such as 2024-05-01T09:00:00Z "
                              "(a number is not read as a time)")


# The UTC offsets a stored time can carry (PostgreSQL's timestamptz takes under 16 hours either way;
# the world's zones stay within -12:00 and +14:00).
_OFFSET_LIMIT = timedelta(hours=16)


def _storable_offset(value: datetime) -> datetime:
    offset = value.utcoffset()
    if offset is not None and abs(offset) >= _OFFSET_LIMIT:
        raise PydanticCustomError("iso_datetime_offset", "use a UTC offset within ±15:59, such as +02:00 or Z")
    return value


# RFC 3339 with the offsets above (Z, or ±00:00 to ±15:59); the documents state it as a pattern.
ISO_DATETIME_SCHEMA_PATTERN = (r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?"
                               r"([Zz]|[+-](0\d|1[0-5]):[0-5]\d)$")
IsoDatetime = Annotated[datetime, BeforeValidator(_iso_time), AfterValidator(_storable_offset),
                        Field(json_schema_extra={"pattern": ISO_DATETIME_SCHEMA_PATTERN})]


# --- evidence -------------------------------------------------------------------------------


Role = Literal["user", "assistant", "system", "tool"]


MESSAGE_ID_MAX_CHARS = 200
SESSION_ID_MAX_CHARS = 200
MAX_TURN_INDEX = 2**31 - 1  # a Postgres integer
MESSAGE_CONTENT_MAX_CHARS = 100_000
# A message's metadata: what the app knows about it besides its words (channel, app, ticket),
# a few short scalar values, read back by filters (`agent_memory.memory.filters`).
METADATA_MAX_KEYS = 16
METADATA_VALUE_MAX_CHARS = 256
MetadataValue = str | int | float | bool
# Metadata as the documents state it: identifier keys, short scalar values (check_metadata applies it).
Metadata = Annotated[
    dict[str, MetadataValue],
    Field(max_length=METADATA_MAX_KEYS, json_schema_extra={
        "propertyNames": {"pattern": IDENTIFIER_SCHEMA_PATTERN},
        "additionalProperties": {"anyOf": [
            {"type": "string", "maxLength": METADATA_VALUE_MAX_CHARS, "pattern": STORABLE_SCHEMA_PATTERN},
            {"type": "integer"}, {"type": "number"}, {"type": "boolean"}]}})]
# An agent, app or run a message belongs to.
ScopeIdentifier = Annotated[str, Field(json_schema_extra={"maxLength": IDENTIFIER_MAX_CHARS,
                                                         "pattern": IDENTIFIER_SCHEMA_PATTERN})] | None
# Who a message was exchanged with besides the subject: the agent, the app and the run (one
# execution of an agent) it belongs to. Each is an identifier; recall, the context, the facts
# listing and the export keep the memories citing a message of a given scope.
SCOPE_FIELDS = ("agent_id", "app_id", "run_id")
SCOPE_DESCRIPTIONS = {
    "agent_id": "the agent the message was exchanged with",
    "app_id": "the app the conversation ran in",
    "run_id": "one run (execution) of the agent, e.g. a task or a job",
}


class Message(BaseModel):
    # The patterns document what the validators below apply, with their own messages.
    message_id: str = Field(min_length=1, max_length=MESSAGE_ID_MAX_CHARS,
                            json_schema_extra={"pattern": PRINTABLE_SCHEMA_PATTERN})
    turn_index: int = Field(ge=0, json_schema_extra={"maximum": MAX_TURN_INDEX})
    role: Role
    # Bounded: an unbounded caption once poisoned a session's consolidation for good.
    speaker: Annotated[str, Field(json_schema_extra={"pattern": STORABLE_SCHEMA_PATTERN})] | None = Field(
        default=None, max_length=200)
    content: str = Field(max_length=MESSAGE_CONTENT_MAX_CHARS, json_schema_extra={"pattern": STORABLE_SCHEMA_PATTERN})
    image_caption: Annotated[str, Field(json_schema_extra={"pattern": STORABLE_SCHEMA_PATTERN})] | None = Field(
        default=None, max_length=4_000)
    created_at: IsoDatetime = Field(description="when the message was written (not later than now, give or take "
                                                "the clock skew allowed)")
    metadata: Metadata = Field(
        default_factory=dict,
        description=f"up to {METADATA_MAX_KEYS} keys ({IDENTIFIER_RULE}) with a string (at most "
                    f"{METADATA_VALUE_MAX_CHARS} characters), number or boolean each; a filter of recall and "
                    "context keeps the memories citing a message whose metadata holds its pairs")
    agent_id: ScopeIdentifier = Field(default=None, description=f"{SCOPE_DESCRIPTIONS['agent_id']} ({IDENTIFIER_RULE})")
    app_id: ScopeIdentifier = Field(default=None, description=f"{SCOPE_DESCRIPTIONS['app_id']} ({IDENTIFIER_RULE})")
    run_id: ScopeIdentifier = Field(default=None, description=f"{SCOPE_DESCRIPTIONS['run_id']} ({IDENTIFIER_RULE})")
    private: bool = Field(default=False, description=(
        "private to the message's agent (its agent_id, or the agent of a key limited to one): the session, its episode and notes are seen only "
        "by keys of that agent and tenant-wide keys, and it adds no facts, entities or relations to the shared "
        "profile; every message of a session is private to the same agent or none is"))

    @field_validator("agent_id", "app_id", "run_id")
    @classmethod
    def _scope_identifier(cls, v: str | None, info: ValidationInfo) -> str | None:
        return None if v is None else check_identifier(str(info.field_name), v)

    @property
    def scope(self) -> dict[str, str | bool]:
        """The scope the message carries: its ids, and whether it is private."""
        ids: dict[str, str | bool] = {name: value for name in SCOPE_FIELDS if (value := getattr(self, name)) is not None}
        return {**ids, "private": True} if self.private else ids

    @property
    def private_to(self) -> str | None:
        """The agent the message is private to (None: shared)."""
        return self.agent_id if self.private else None

    @field_validator("metadata")
    @classmethod
    def _bounded_metadata(cls, v: dict[str, MetadataValue]) -> dict[str, MetadataValue]:
        return check_metadata("metadata", v)

    @field_validator("message_id", "speaker", "content", "image_caption")
    @classmethod
    def _storable(cls, v: str | None) -> str | None:
        return storable_text(v)

    @field_validator("message_id")
    @classmethod
    def _printable_id(cls, v: str) -> str:
        return printable_id("message_id", v)

    @field_validator("turn_index")
    @classmethod
    def _turn_in_range(cls, v: int) -> int:
        if v > MAX_TURN_INDEX:
            raise InvalidInput(f"turn_index must be at most {MAX_TURN_INDEX}")
        return v

    @field_validator("created_at")
    @classmethod
    def _time_in_range(cls, v: datetime) -> datetime:
        return storable_time(v)


class Session(BaseModel):
    session_id: str = Field(min_length=1, max_length=SESSION_ID_MAX_CHARS)
    started_at: datetime | None = None
    messages: list[Message] = Field(min_length=1)

    @field_validator("session_id")
    @classmethod
    def _storable(cls, v: str) -> str:
        return printable_id("session_id", storable_text(v))

    @field_validator("messages")
    @classmethod
    def _one_message_a_position(cls, messages: list[Message]) -> list[Message]:
        """Two messages of one call may not share a turn_index (the same message sent twice may)."""
        holders: dict[int, str] = {}
        for index, m in enumerate(messages):
            holder = holders.setdefault(m.turn_index, m.message_id)
            if holder != m.message_id:
                raise InvalidInput(f"messages[{index}].turn_index: position {m.turn_index} is also given to message "
                                   f"{holder!r} in this call; give each message its own turn_index")
        return messages

    @field_validator("started_at")
    @classmethod
    def _time_in_range(cls, v: datetime | None) -> datetime | None:
        return None if v is None else storable_time(v)


# --- provider outputs (recorded as operation results) ------------------------------------------

ClaimType = Literal["explicit", "inference"]
Permanence = Literal["permanent", "temporary", "task_local"]
FactOperation = Literal["assert", "confirm", "end", "correct"]


class ProviderResult(BaseModel):
    """Common bookkeeping of one provider call, recorded in the operations table."""

    provider: str = ""
    provider_request_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    # What was replaced by placeholders before a remote call, counted by kind (email, phone,
    # card, iban); never the values (agent_memory/providers/policy.py).
    redacted: dict[str, int] = Field(default_factory=dict)


class ExtractedFact(BaseModel):
    namespace: str  # profile, location, travel, work, preference, dislike, diet, pet, budget
    key: str  # e.g. home_city; (namespace, key) is the fact's identity for a subject
    value: str
    # What the statement does to the subject's fact at (namespace, key): "assert" a new or changed
    # value, "confirm" the current one, "end" it (no longer true from observed_at; value: the
    # value that ended, or "" for whatever is current), "correct" it (the current value was never
    # true: it is voided and `value` holds from the voided interval's start; with value "" the key
    # itself was a mistake, "it's Mochi, not Mocha", and nothing holds under it).
    operation: FactOperation = "assert"
    claim_type: ClaimType = "explicit"
    permanence: Permanence = "permanent"
    valid_until: datetime | None = None  # end of a temporary fact, when known
    confidence: float = Field(ge=0.0, le=1.0)
    evidence_message_ids: list[str] = Field(min_length=1)
    observed_at: datetime


class KnownFact(BaseModel):
    """A current fact of the subject as an extractor is shown it, so it can say what a statement
    does to it (confirm, end, correct) instead of only asserting values."""

    namespace: str
    key: str
    value: str
    observed_at: datetime | None = None  # start of the current value; the newest are kept when capped


EntityType = Literal["person", "pet", "place", "organisation", "event", "thing"]
ENTITY_TYPES: tuple[EntityType, ...] = ("person", "pet", "place", "organisation", "event", "thing")
ENTITY_NAME_MAX = 80
ENTITY_ALIASES_MAX = 8
EntityName = Annotated[str, Field(min_length=1, max_length=ENTITY_NAME_MAX)]


class ExtractedEntity(BaseModel):
    """Someone or something a session mentions (a person, a pet, a place, an organisation, an
    event, a thing), whoever said it: the same schema from the offline extractor and a model.
    `name` is the fullest form the session uses; `aliases` other forms it uses for the same one
    ("Mel" for "Melanie", "我妈" for "妈妈"). The commit resolves it to the subject's entity that
    carries that name or alias, else a new one."""

    model_config = ConfigDict(extra="forbid")

    name: EntityName
    entity_type: EntityType
    aliases: list[EntityName] = Field(default_factory=list, max_length=ENTITY_ALIASES_MAX)
    evidence_message_ids: list[str] = Field(min_length=1)  # the messages that mention it


RelationType = Literal[
    "family", "partner", "friend", "colleague", "works_at", "studies_at", "lives_in", "member_of", "owns",
    "attended", "visited",
]
RELATION_TYPES: tuple[RelationType, ...] = (
    "family", "partner", "friend", "colleague", "works_at", "studies_at", "lives_in", "member_of", "owns",
    "attended", "visited",
)
# One current edge per source: a new target closes the old one ("I moved to Suzhou" ends lives_in
# Shanghai). The others are many-valued: a second friend does not end the first.
SINGLE_VALUED_RELATIONS: frozenset[RelationType] = frozenset({"partner", "works_at", "studies_at", "lives_in"})
RELATION_ROLE_MAX = 40


class ExtractedRelation(BaseModel):
    """An edge between two entities a session states ("my sister Mia", "Lin works at Acme", "we
    moved to Suzhou"), by entity name: the same schema from the offline extractor and a model.
    `role` refines the type where it has one ("sister" for family, "manager" for colleague).
    "assert" starts the edge from observed_at; "end" closes the current one (target "" for
    whatever is current). Each name must be an entity of the same result, or the speaker."""

    model_config = ConfigDict(extra="forbid")

    source: EntityName
    relation: RelationType
    target: Annotated[str, Field(max_length=ENTITY_NAME_MAX)]
    role: Annotated[str, Field(max_length=RELATION_ROLE_MAX)] = ""
    operation: Literal["assert", "end"] = "assert"
    evidence_message_ids: list[str] = Field(min_length=1)
    observed_at: datetime


class ExtractionResult(ProviderResult):
    extractor: str
    extractor_version: str
    facts: list[ExtractedFact]
    # People, places and things the session mentions (absent from results recorded without them).
    entities: list[ExtractedEntity] = Field(default_factory=list)
    # Edges between those entities (absent from results recorded without them).
    relations: list[ExtractedRelation] = Field(default_factory=list)
    # Digest of the current facts the extractor was shown (set by the extract_facts activity).
    current_facts_digest: str | None = None
    # Statements the extractor read but kept out of `facts`, counted by reason: `another_speaker` is
    # what another person sharing the account said about themselves that no relation holds
    # (agent_memory.core.seat). The commit counts them with the write gate's.
    withheld: dict[str, int] = Field(default_factory=dict)


class ImportanceResult(ProviderResult):
    importance: int = Field(ge=1, le=10)
    rationale: str = ""


class SummarySentence(BaseModel):
    text: str
    source_message_ids: list[str] = Field(min_length=1)


class Observation(BaseModel):
    """A compact note of one message (speaker, informative sentences, resolved dates)."""

    text: str
    source_message_ids: list[str] = Field(min_length=1)
    happened_at: datetime
    # The question this message answers, for the lexical index only: it helps find the answer by
    # the question's words, but is never shown, because the note cites only its own message.
    answers: str | None = None


class SummaryResult(ProviderResult):
    sentences: list[SummarySentence]
    token_count: int
    observations: list[Observation] = Field(default_factory=list)
    # Why the session got no episode and no summary call (agent_memory/memory/substance.py): fewer
    # messages than an episode needs, or nothing but small talk. None: summarized.
    gated: Literal["too_short", "small_talk"] | None = None

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.sentences)


class EmbeddingResult(ProviderResult):
    """An embedding call's result. Recorded (operations.result, JSON) with each vector packed as
    base64 of its float32 values, little-endian: exactly what pgvector stores, so a vector
    rebuilt or restored from the record equals the one first written, and a stored e5-small
    record takes 2.3 KB instead of 5.0 KB as a list of JSON numbers. Records in either form are
    read."""

    model: str
    vectors: list[list[float]]

    @field_validator("vectors", mode="before")
    @classmethod
    def _unpack_float32(cls, value: Any) -> Any:
        if isinstance(value, dict) and isinstance(value.get("float32_base64"), list):
            unpacked = []
            for packed in value["float32_base64"]:
                raw = base64.b64decode(packed, validate=True)
                if len(raw) % 4:
                    raise InvalidInput("a packed vector's length is not a multiple of 4 bytes (float32)")
                unpacked.append(list(struct.unpack(f"<{len(raw) // 4}f", raw)))
            return unpacked
        return value

    @field_serializer("vectors", when_used="json")
    def _pack_float32(self, vectors: list[list[float]]) -> dict[str, list[str]]:
        return {"float32_base64": [base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode("ascii") for v in vectors]}


# --- current memory --------------------------------------------------------------------------


class FactRow(BaseModel):
    """One interval of a fact: its value, when it held (valid_from → valid_to), when it was last
    said again or confirmed, what wrote it, and the messages it was learned from."""

    fact_id: str
    memory_id: str
    tenant_id: str
    subject_id: str
    namespace: str
    key: str
    value: str
    # The memory's version: what a conditional write (write_fact's expected_version) accepts.
    version: int
    # The version whose event opened this interval (its lexical and vector rows carry it).
    interval_version: int
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    confidence: float
    claim_type: str
    permanence: str
    source_kind: str
    status: str
    evidence_message_ids: list[str]
    task_session_id: str | None = None  # a task-local fact's session: recall shows it there only
    metadata: dict[str, MetadataValue] = {}  # what the agent or app that wrote it said of it (write_fact)
    last_confirmed_at: datetime = Field(description=(
        "when the value was last said again or confirmed: the latest restatement in a later session, "
        "else when it was itself stated"))
    extracted_by: str | None = Field(default=None, description=(
        "what wrote the value: the extractor and its version (e.g. 'rule-extractor/8'), or 'live-write:' and "
        "the writer (user, agent, operator) for a value written directly; null if not recorded"))
    stale_reasons: list[str] = Field(default_factory=list, description=(
        "the daily review's marks in force on this value (stale, contradicted, candidate_expiring): recall and "
        "the context down-weight it until it is kept, corrected or forgotten (`review list`); empty if none"))


# --- workflow and activity payloads --------------------------------------------------------------


class ConsolidationInput(RunInput):
    kind: Literal["consolidation"] = "consolidation"
    tenant_id: str
    subject_id: str
    session_id: str


class StepInput(RunInput):
    """Reference to a session being consolidated; activities fetch the data themselves."""

    tenant_id: str
    subject_id: str
    session_id: str
    # The run's message set: those recorded up to this time (set by the first step), so every
    # step of one run sees the same messages however many arrive meanwhile.
    through: datetime | None = None


class StepOutcome(BaseModel):
    operation_id: str
    count: int = 0
    reused: bool = False  # True when the recorded result was returned without a provider call
    through: datetime | None = None  # when the newest message the step saw was recorded
    # count_unconsolidated: seconds since the session's newest message was recorded (Postgres's
    # clock); the idle timer waits on when appends signal it at most once per debounce window.
    idle_seconds: float | None = None


class ConflictPlanInput(RunInput):
    tenant_id: str
    subject_id: str
    session_id: str
    through: datetime | None = None
    extraction_operation_id: str
    round: int = 0  # bumped when the commit found a newer version: re-read and re-decide


FactAction = Literal["create", "supersede", "confirm", "candidate", "promote", "end", "correct"]


class FactDecision(BaseModel):
    action: FactAction
    namespace: str
    key: str
    value: str
    expected_version: int  # version of the current fact the decision was made against (0: none)
    reason: str
    fact_index: int  # index into the recorded extraction result
    # Evidence of the candidate this decision promotes (corroborated in a later session).
    promoted_candidate_evidence: list[str] = Field(default_factory=list)
    voided: bool = False  # an "end" whose value was never true (a correction of the key itself)


class ConflictPlan(BaseModel):
    decisions: list[FactDecision]


class CommitInput(RunInput):
    tenant_id: str
    subject_id: str
    session_id: str
    through: datetime | None = None
    extraction_operation_id: str
    plan_operation_id: str
    importance_operation_id: str
    summary_operation_id: str


class CommitOutcome(BaseModel):
    operation_id: str
    session_id: str = ""
    through: datetime | None = None  # messages recorded up to here are consolidated
    events_appended: int
    facts_written: int
    episode_written: bool
    observations_written: int = 0
    entities_noted: int = 0  # entities the session mentioned in messages not recorded as their mentions yet
    relations_noted: int = 0  # edges the session started or closed
    outbox_rows: int
    refused_reason: str | None = None
    # Facts the write gate kept out, per reason (agent_memory.memory.write_policy; forgotten memories).
    withheld: dict[str, int] = Field(default_factory=dict)


class ProjectionInput(RunInput):
    tenant_id: str
    subject_id: str


class ProjectionOutcome(BaseModel):
    vectors_upserted: int
    outbox_done: int
    skipped: int = 0


class ConsolidationProgress(BaseModel):
    step: str
    facts_extracted: int = 0
    decisions: int = 0
    events_appended: int = 0
    vectors_upserted: int = 0
    conflict_retries: int = 0


class TokenBudgetState(BaseModel):
    """A tenant's daily model-token budget and what its recorded model calls spent of it on the
    current UTC day (agent_memory/memory/token_budget.py): what a consolidation checks before its
    model calls, and what `agent-memory token-budget show` prints."""

    tenant_id: str
    daily_tokens: int | None  # the budget in force; None: unlimited
    source: Literal["tenant", "default"]  # set for the tenant, or the deployment's AGENT_MEMORY_DAILY_TOKEN_BUDGET
    day: date  # the UTC day counted
    used_tokens: int

    @property
    def exhausted(self) -> bool:
        return self.daily_tokens is not None and self.used_tokens >= self.daily_tokens


class ProviderPlacement(BaseModel):
    """Where a worker's providers compute (providers.base.runs_in_worker), recorded once per
    consolidation run so that its replay takes the same route on any worker."""

    model_steps_in_worker: bool  # extractor, scorer and summarizer all in the worker's process
    embedder_in_worker: bool


class ConsolidationStepsOutcome(BaseModel):
    """What the steps of a consolidation did, as the one-activity routes' activities return it
    (ConsolidationActivities.consolidate_in_worker, consolidate_with_remote_providers) and the
    workflow's steps_outcome query answers: the counts the workflow reports (its progress and its
    result), operation ids only. Without a commit nothing was done: the run goes on to the one
    ordinary activity."""

    placement: ProviderPlacement
    facts_extracted: int = 0
    decisions: int = 0
    conflict_retries: int = 0
    commit: CommitOutcome | None = None
    # The batch that embedded the run's own rows (pending: rows left to the subject's projector);
    # None when the subject was erased after the commit.
    projection: ProjectorBatchOutcome | None = None
    refused_reason: str | None = None


class ConsolidationResult(BaseModel):
    workflow_id: str
    tenant_id: str
    subject_id: str
    session_id: str
    facts_extracted: int
    events_appended: int
    facts_written: int
    episode_written: bool
    vectors_upserted: int
    refused_reason: str | None = None
    withheld: dict[str, int] = Field(default_factory=dict)  # facts the write gate kept out, per reason
    # True when the subject's projector was woken to embed what the run did not (a remote embedder,
    # rows left over or failed): the vectors follow from the projector run, not from this one.
    projector_woken: bool = False


class ErasureInput(RunInput):
    kind: Literal["erasure"] = "erasure"
    tenant_id: str
    subject_id: str
    request_id: str
    # Runs started before the reason was stored encrypted carry it here; new runs find it in
    # Postgres (registered by the client), so it never enters workflow history.
    reason: str | None = None


class ErasureStepInput(RunInput):
    tenant_id: str
    subject_id: str
    request_id: str
    store: str = ""


class StoreCount(BaseModel):
    store: str
    removed: int


class ErasureReceipt(BaseModel):
    request_id: str
    tenant_id: str
    subject_id: str  # the subject's keyed digest ("erased:..."), never the clear id
    reason: str | None = None  # receipts written before reasons were encrypted carried it
    removed: dict[str, int]
    residue: dict[str, int]
    residue_total: int
    key_shredded: bool
    # The key-encryption key that wrapped the shredded subject key: until a rotation destroys it,
    # an old copy of the wrapped key (WAL, backup) could still decrypt the payloads.
    key_wrapped_by: str | None = None
    shred_irreversible_after: str = "the next key rotation (agent-memory keys rotate, or the daily Schedule)"
    requested_at: datetime
    tombstoned_at: datetime
    completed_at: datetime
    compaction_ticket: str | None = None
    physical_horizon: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def data_found(self) -> bool:
        """Whether the erasure found anything of the subject (a mistyped id finds nothing)."""
        # key_wrapped_by: a subject key existed (key_shredded is also true when there was none).
        return self.key_wrapped_by is not None or any(self.removed.values())


class ErasureStatus(BaseModel):
    request_id: str
    tenant_id: str
    status: str
    reason: str | None
    requested_at: datetime
    completed_at: datetime | None
    receipt: ErasureReceipt | None
    key_wrapped_by: str | None
    shred_irreversible: bool
    shred_irreversible_at: datetime | None
    shred_irreversible_by_rotation: str | None
    compacted: bool
    compacted_at: datetime | None
    compaction_id: str | None
    # The Schedules this request still waits on (key rotation before the shred is irreversible,
    # compaction before the residue leaves the disk) that are paused, altered or missing, each
    # with what it holds back: until restored (agent-memory schedules ensure), nothing moves.
    held_back_by: dict[str, str] = Field(default_factory=dict)


class ErasureProgress(BaseModel):
    step: str
    stores_done: list[str] = Field(default_factory=list)


# --- rebuild of the projections from the event log ---------------------------------------------


class RebuildInput(RunInput):
    kind: Literal["rebuild"] = "rebuild"
    tenant_id: str
    subject_id: str | None = None  # None: every subject of the tenant
    request_id: str
    force: bool = False  # swap the rebuilt tables in even when the digests are equal
    # A tenant-wide rebuild goes through the subjects a page at a time, continuing as a new run
    # after each page: the last subject done, and what the earlier runs found.
    subjects_per_run: int = Field(default=200, ge=1)
    after_subject: str | None = None
    carried: RebuildResult | None = None
    # At most this many subject reports the client lists in the result (read from
    # rebuild_reports, those an operator must see first); the totals count every subject.
    listed_max: int = Field(default=200, ge=0, le=1000)


class RebuildSubjectInput(RunInput):
    tenant_id: str
    subject_id: str
    force: bool = False
    request_id: str | None = None  # the subject's report goes to rebuild_reports under it


class SubjectListInput(RunInput):
    tenant_id: str
    after_subject: str | None = None
    limit: int | None = None


class SubjectList(BaseModel):
    subjects: list[str]


class SubjectRebuild(BaseModel):
    """One subject: the live projection's digest against the one rebuilt from the event log."""

    subject: str
    live_digest: str
    rebuilt_digest: str
    equal: bool  # the live projection equalled the rebuilt one (before any repair)
    rows: int  # rows of the rebuilt projection
    skipped_erased: bool = False  # tombstoned or key shredded: nothing replayed, nothing written
    repaired: bool = False  # rebuilt tables were swapped in (digests differed, or forced)
    events: int = 0
    tables_differing: list[str] = Field(default_factory=list)
    rows_by_table: dict[str, int] = Field(default_factory=dict)
    live_rows_by_table: dict[str, int] = Field(default_factory=dict)
    vectors_from_operations: int = 0  # taken from recorded embed operations (no provider call)
    vectors_kept: int = 0  # live vectors of a replayed item under a model with no recorded operation
    vectors_missing: int = 0  # replayed items still without a vector (in flight: the vector projection's)
    vectors_reembedded: int = 0  # lost with no recorded embedding: embedded once (recorded), then rebuilt
    unmatched_operations: int = 0  # recorded embeddings of a text the replay does not produce
    elapsed_ms: int = 0


class RebuildProgress(BaseModel):
    step: str
    subjects_total: int = 0
    subjects_done: int = 0
    mismatched: int = 0
    skipped_erased: int = 0
    rows: int = 0


class RebuildResult(BaseModel):
    workflow_id: str
    request_id: str | None = None  # its subjects' reports in rebuild_reports
    listed_max: int = 200  # how many of them the client lists in `subjects`
    tenant_id: str
    subject_id: str | None
    force: bool
    subjects: list[SubjectRebuild]
    subjects_total: int
    subjects_equal: int
    subjects_repaired: int
    skipped_erased: int
    rows: int
    events: int
    all_equal: bool  # every subject that was replayed matched its live projection
    subjects_not_listed: int = 0  # subjects counted in the totals but left out of `subjects`
    # `subjects` is filled by the client from rebuild_reports (the workflow carries counts only).


RebuildInput.model_rebuild()


# --- re-derivation of stored memory under the current extractor (workflows/rederive.py) ---

RederiveChangeKind = Literal["added", "changed", "unsupported", "kept_confirmed", "withheld"]
REDERIVE_CHANGE_KINDS: tuple[RederiveChangeKind, ...] = ("added", "changed", "unsupported", "kept_confirmed",
                                                         "withheld")


class RederiveCounts(BaseModel):
    """What a re-derivation found (and, unless a dry run, applied), by kind of difference."""

    sessions: int = 0
    added: int = 0  # a key the session states and the subject has never had a value of: created
    changed: int = 0  # the session's own value extracted differently: corrected (the old value was wrong)
    unsupported: int = 0  # a current value the new extraction no longer finds: listed, left as it is
    kept_confirmed: int = 0  # a value a person wrote or confirmed: never changed, listed
    withheld: int = 0  # the tenant's write policy keeps the new value out (namespace, consent, confirm keys)
    events_appended: int = 0

    def plus(self, other: RederiveCounts) -> RederiveCounts:
        return RederiveCounts(**{name: getattr(self, name) + getattr(other, name) for name in type(self).model_fields})


class RederiveInput(RunInput):
    kind: Literal["rederive"] = "rederive"
    tenant_id: str
    subject_id: str | None = None  # None: every subject of the tenant
    request_id: str
    dry_run: bool = True  # list the differences, write no event
    all_sessions: bool = False  # every consolidated session, not only those of an older extractor
    # A tenant-wide run goes through the subjects a page at a time, continuing as a new run after
    # each page: the last subject done, and what the earlier runs found.
    subjects_per_run: int = Field(default=100, ge=1)
    after_subject: str | None = None
    carried: RederiveResult | None = None


class RederiveSubjectInput(RunInput):
    tenant_id: str
    subject_id: str
    all_sessions: bool = False


class RederiveSessions(BaseModel):
    extractor: str  # the current extractor, "rule-extractor/9"
    sessions: list[str]


class RederiveSessionInput(RunInput):
    tenant_id: str
    subject_id: str
    session_id: str
    request_id: str
    extraction_operation_id: str  # the current extractor's recorded extraction of the session
    dry_run: bool = True


class RederiveChange(BaseModel):
    """One difference between a session's facts and its extraction by the current extractor."""

    change: RederiveChangeKind
    namespace: str
    key: str
    current_value: str | None = None  # the fact's value now (None: no current value)
    derived_value: str | None = None  # what the current extractor reads in the session (None: nothing)
    memory_id: str
    reason: str = ""


class SessionRederive(BaseModel):
    """A session's re-derivation as recorded in the operations ledger (it holds values: it is
    read back by the client, never carried in a workflow's history)."""

    subject_id: str
    session_id: str
    extractor: str
    dry_run: bool
    changes: list[RederiveChange]
    events_appended: int = 0

    def counts(self) -> RederiveCounts:
        found = {kind: sum(c.change == kind for c in self.changes) for kind in REDERIVE_CHANGE_KINDS}
        return RederiveCounts(sessions=1, events_appended=self.events_appended, **found)


class SessionRederiveOutcome(BaseModel):
    """What the workflow learns of a session: its record's operation id and counts, no value."""

    operation_id: str
    counts: RederiveCounts
    reused: bool = False  # the session's record existed (a retry, a resumed run): nothing done again


class RederiveProgress(BaseModel):
    step: str
    extractor: str = ""
    subjects_done: int = 0
    sessions_total: int = 0
    sessions_done: int = 0
    added: int = 0
    changed: int = 0
    unsupported: int = 0
    kept_confirmed: int = 0
    withheld: int = 0
    events_appended: int = 0


class RederiveResult(BaseModel):
    workflow_id: str
    request_id: str
    tenant_id: str
    subject_id: str | None
    dry_run: bool
    all_sessions: bool
    extractor: str
    subjects: int
    totals: RederiveCounts


class SubjectRederive(BaseModel):
    """One subject's differences, per kind (what the client reads from the recorded sessions)."""

    subject_id: str
    sessions: list[str]
    added: list[RederiveChange] = Field(default_factory=list)
    changed: list[RederiveChange] = Field(default_factory=list)
    unsupported: list[RederiveChange] = Field(default_factory=list)
    kept_confirmed: list[RederiveChange] = Field(default_factory=list)
    withheld: list[RederiveChange] = Field(default_factory=list)


class RederiveReport(BaseModel):
    """A re-derivation's result (counts, from the workflow) with its differences per subject."""

    result: RederiveResult
    subjects: list[SubjectRederive]


RederiveInput.model_rebuild()


# --- storable evidence text (validated at the edge, so ingest names the line and nothing is half-written) ---

_EARLIEST, _LATEST = datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC)


def storable_time(value: datetime) -> datetime:
    """The time with its UTC offset (one given without an offset is read as UTC, never as the
    database server's zone), within years 1-9999 in UTC too (Postgres stores +14:00 midnight of
    year 1 as 1 BC, which Python cannot read back, so such a message would be stored and then
    never load)."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        inside = _EARLIEST <= aware <= _LATEST
    except OverflowError:
        inside = False
    if not inside:
        raise InvalidInput("time out of range: use a time between 0001-01-02 and 9999-12-30 (UTC)")
    return aware


@overload
def storable_text(value: str) -> str: ...
@overload
def storable_text(value: None) -> None: ...
def storable_text(value: str | None) -> str | None:
    """Postgres text holds no NUL character and Unicode text no lone surrogate (e.g. a JSON
    "\\ud800" escape): refuse them here rather than fail half-way through a write."""
    if value is None:
        return None
    if "\x00" in value:
        raise InvalidInput("contains a NUL character (\\u0000), which cannot be stored; remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("contains a lone UTF-16 surrogate, which is not valid Unicode text; fix the encoding") from None
    return value




def printable_id(field: str, value: str) -> str:
    """An id is shown in logs, URLs and the Temporal UI: no control characters (newlines, tabs,
    escapes), which would forge or garble what an operator reads."""
    if (m := CONTROL_CHARACTERS.search(value)) is not None:
        raise InvalidInput(f"{field} contains the control character U+{ord(m.group(0)):04X}; use printable "
                           "characters only")
    return value


# --- the idle timer of a session ------------------------------------------------------------------


class SessionIdleInput(RunInput):
    kind: Literal["session-idle"] = "session-idle"
    tenant_id: str
    subject_id: str
    session_id: str
    idle_seconds: float = Field(default=600, gt=0)


class SessionIdleResult(BaseModel):
    outcome: str
    consolidation_workflow_id: str | None = None
