"""Every key of an answer reaches the caller: the operations whose answers are typed by their
response model (FastAPI serialises only the declared fields) still carry each key, nested ones
included, that their bodies carry on the real server with real data (facts, entities and
relations, an episode, an explained read, a forgotten memory, a completed erasure)."""

from __future__ import annotations

import re
from typing import Any

from agent_memory.core.models import ErasureReceipt
from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import MESSAGES, api, bearer
from tests.memory.test_relations import ENGLISH, _commit, _extraction, _sessions

# The key paths of each operation's answer: `a.b` a nested key, `a[].b` a key of a list's items,
# `*` a key that is data (a memory id, a message id) rather than a name. Recorded from the server's
# answers to the requests below: a response model that leaves a key out fails here.
RECORDED: dict[str, set[str]] = {
    "health": set("status".split()),
    "append": set("duplicates idle_timer inserted last_message_id session_id skipped_turns".split()),
    "entities": set("[].aliases [].entity_type [].first_seen_at [].last_seen_at [].memory_id [].mentioned_in [].name".split()),
    "relations": set(
        "[].evidence_message_ids [].memory_id [].relation [].relation_id [].role [].source_entity_id "
        "[].source_name [].target_entity_id [].target_name [].valid_from [].valid_to".split()),
    "recall explain=False": set(
        "episodes facts facts[].claim_type facts[].confidence facts[].evidence_message_ids "
        "facts[].extracted_by facts[].fact_id facts[].interval_version facts[].key facts[].last_confirmed_at "
        "facts[].memory_id facts[].metadata facts[].namespace facts[].permanence facts[].recorded_at "
        "facts[].source_kind facts[].stale_reasons facts[].status facts[].subject_id facts[].task_session_id "
        "facts[].tenant_id facts[].valid_from facts[].valid_to facts[].value facts[].version "
        "leak_filter_dropped query stale_hits_dropped subject_id tenant_id".split()),
    "context explain=False": set(
        "as_of budget episodic_budget episodic_text episodic_tokens items items[].cited_message_ids "
        "items[].content items[].happened_at items[].importance items[].kind items[].last_confirmed_at "
        "items[].memory_id items[].relevance items[].score items[].session_id items[].text items[].tier "
        "leak_filter_dropped policy policy.access_decay policy.access_weight policy.episode_tokens "
        "policy.episodic_tokens policy.importance_base policy.importance_slope policy.max_episodes "
        "policy.min_relevance policy.profile_min_confidence policy.profile_tokens policy.recent_tokens "
        "policy.recent_turns policy.tau_days policy.total_tokens policy.window_days profile_budget "
        "profile_text profile_tokens query text tokens".split()),
    "recall explain=True": set(
        "episodes explanations explanations[].kind explanations[].memory_id explanations[].rank "
        "explanations[].similarity explanations[].staleness_term explanations[].vector_rank facts "
        "facts[].claim_type facts[].confidence facts[].evidence_message_ids facts[].extracted_by "
        "facts[].fact_id facts[].interval_version facts[].key facts[].last_confirmed_at facts[].memory_id "
        "facts[].metadata facts[].namespace facts[].permanence facts[].recorded_at facts[].source_kind "
        "facts[].stale_reasons facts[].status facts[].subject_id facts[].task_session_id facts[].tenant_id "
        "facts[].valid_from facts[].valid_to facts[].value facts[].version leak_filter_dropped query "
        "stale_hits_dropped subject_id tenant_id".split()),
    "context explain=True": set(
        "as_of below_budget budget episodic_budget episodic_text episodic_tokens items "
        "items[].cited_message_ids items[].content items[].explanation items[].explanation.access_term "
        "items[].explanation.admitted items[].explanation.fused items[].explanation.importance_term "
        "items[].explanation.neighbour_of items[].explanation.neighbour_step items[].explanation.not_admitted "
        "items[].explanation.profile items[].explanation.profile.confidence "
        "items[].explanation.profile.namespace_order items[].explanation.profile.of "
        "items[].explanation.profile.rank items[].explanation.profile.shared_terms "
        "items[].explanation.profile.task_local items[].explanation.relevance items[].explanation.routes "
        "items[].explanation.routes.lexical items[].explanation.routes.lexical.* "
        "items[].explanation.routes.lexical.rank items[].explanation.routes.lexical.score "
        "items[].explanation.routes.lexical.similarity items[].explanation.routes.vector "
        "items[].explanation.routes.vector.* items[].explanation.routes.vector.rank "
        "items[].explanation.routes.vector.score items[].explanation.routes.vector.similarity "
        "items[].explanation.score items[].explanation.staleness_term items[].explanation.tier "
        "items[].explanation.time_decay items[].happened_at items[].importance items[].kind "
        "items[].last_confirmed_at items[].memory_id items[].relevance items[].score items[].session_id "
        "items[].text items[].tier leak_filter_dropped policy policy.access_decay policy.access_weight "
        "policy.episode_tokens policy.episodic_tokens policy.importance_base policy.importance_slope "
        "policy.max_episodes policy.min_relevance policy.profile_min_confidence policy.profile_tokens "
        "policy.recent_tokens policy.recent_turns policy.tau_days policy.total_tokens policy.window_days "
        "profile_budget profile_text profile_tokens query text tokens".split()),
    "prompt": set(
        "as_of blocks blocks[].budget blocks[].citations blocks[].citations.* blocks[].cited_message_ids "
        "blocks[].item_ids blocks[].messages blocks[].messages[].content blocks[].messages[].role "
        "blocks[].name blocks[].tokens cited_item_ids leak_filter_dropped messages messages[].content "
        "messages[].role recent_source session_id subject_id summarized_turns tenant_id tokens".split()),
    "write_fact": set(
        "entities_noted episode_written events_appended facts_written observations_written operation_id "
        "outbox_rows refused_reason relations_noted session_id through withheld".split()),
    "forget": set(
        "already_forgotten forgotten_at memory_id memory_kind projection_rows_removed restorable_until "
        "subject_id tenant_id vectors_removed version".split()),
    "export": set(
        "cited_messages cited_messages[].agent_id cited_messages[].app_id cited_messages[].content "
        "cited_messages[].created_at cited_messages[].message_id cited_messages[].metadata "
        "cited_messages[].private_to cited_messages[].role cited_messages[].run_id "
        "cited_messages[].session_id cited_messages[].speaker entities entities[].aliases "
        "entities[].entity_type entities[].first_seen_at entities[].last_seen_at entities[].memory_id "
        "entities[].mentioned_in entities[].name episodes erased erasure_requests exported_at facts "
        "facts[].claim_type facts[].confidence facts[].evidence_message_ids facts[].extracted_by "
        "facts[].fact_id facts[].interval_version facts[].key facts[].last_confirmed_at facts[].memory_id "
        "facts[].metadata facts[].namespace facts[].permanence facts[].recorded_at facts[].source_kind "
        "facts[].stale_reasons facts[].status facts[].subject_id facts[].task_session_id facts[].tenant_id "
        "facts[].valid_from facts[].valid_to facts[].value facts[].version forgotten forgotten[].actor "
        "forgotten[].content forgotten[].content[].claim_type forgotten[].content[].confidence "
        "forgotten[].content[].key forgotten[].content[].metadata forgotten[].content[].namespace "
        "forgotten[].content[].occurred_at forgotten[].content[].permanence forgotten[].content[].promoted "
        "forgotten[].content[].reason forgotten[].content[].session_id forgotten[].content[].type "
        "forgotten[].content[].valid_until forgotten[].content[].value forgotten[].content[].version "
        "forgotten[].forgotten_at forgotten[].memory_id forgotten[].memory_kind forgotten[].restorable_until "
        "forgotten[].state format notes notes[].happened_at notes[].memory_id notes[].session_id "
        "notes[].source_message_ids notes[].text relations relations[].evidence_message_ids "
        "relations[].memory_id relations[].relation relations[].relation_id relations[].role "
        "relations[].source_entity_id relations[].source_name relations[].target_entity_id "
        "relations[].target_name relations[].valid_from relations[].valid_to subject_id tenant_id tool_calls".split()),
    "restore": set("events_reapplied memory_id memory_kind subject_id tenant_id version".split()),
    "remove_category": set("removed".split()),
    "erasure": set(
        "compacted compacted_at compaction_id completed_at held_back_by key_wrapped_by reason receipt "
        "receipt.compaction_ticket receipt.completed_at receipt.data_found receipt.key_shredded "
        "receipt.key_wrapped_by receipt.physical_horizon receipt.reason receipt.removed "
        "receipt.removed.consents receipt.removed.entities receipt.removed.entity_mentions "
        "receipt.removed.episodes receipt.removed.event_metadata receipt.removed.facts "
        "receipt.removed.forgotten_memories receipt.removed.lexical_frequencies "
        "receipt.removed.lexical_statistics receipt.removed.memory_access receipt.removed.memory_postings "
        "receipt.removed.messages receipt.removed.observations receipt.removed.operations "
        "receipt.removed.outbox receipt.removed.rebuild_reports receipt.removed.relations "
        "receipt.removed.search_index receipt.removed.sessions receipt.removed.stale_marks "
        "receipt.removed.tool_calls receipt.removed.vectors receipt.removed.webhook_deliveries "
        "receipt.removed.working_memory receipt.request_id receipt.requested_at receipt.residue "
        "receipt.residue.episodes receipt.residue.event_metadata receipt.residue.facts "
        "receipt.residue.messages receipt.residue.observations receipt.residue.operations "
        "receipt.residue.outbox receipt.residue.search_index receipt.residue.subject_key "
        "receipt.residue.vectors receipt.residue.working_memory receipt.residue_total "
        "receipt.shred_irreversible_after receipt.subject_id receipt.tenant_id receipt.tombstoned_at "
        "request_id requested_at shred_irreversible shred_irreversible_at shred_irreversible_by_rotation "
        "status tenant_id".split()),
}


def key_paths(value: Any, path: str = "") -> set[str]:
    """Every key path of a JSON value (the union over a list's items)."""
    if isinstance(value, dict):
        paths: set[str] = set()
        for key, item in value.items():
            name = key if re.fullmatch(r"[a-z_]+", key) else "*"
            inner = f"{path}.{name}" if path else name
            paths |= {inner} | key_paths(item, inner)
        return paths
    if isinstance(value, list):
        return set().union(*(key_paths(item, f"{path}[]") for item in value))
    return set()


def test_key_paths_name_nested_and_listed_keys():
    assert key_paths({"a": 1, "b": {"c": [{"d": 1}, {"e": {"h1:1": 2}}]}}) == {
        "a", "b", "b.c", "b.c[].d", "b.c[].e", "b.c[].e.*"}


async def test_every_answer_keeps_each_key_it_carries(client, services, tenant, running_worker):
    writer = (await create_key(services.pool, tenant, "write")).token
    reader = (await create_key(services.pool, tenant, "read")).token
    eraser = (await create_key(services.pool, tenant, "erase")).token
    answers: dict[str, Any] = {}
    for i, s in enumerate(_sessions(ENGLISH)):  # entities and relations, one of them ended
        await client.append_messages(tenant, "lin", s)
        await _commit(services, tenant, "lin", s, *_extraction(ENGLISH, i, s))
    async with running_worker(), api(client) as http:

        async def answer(name: str, method: str, url: str, key: str | None = None, **kwargs: Any) -> Any:
            done = await http.request(method, url, headers=bearer(key) if key else None, **kwargs)
            assert done.status_code == 200, (name, done.text)
            answers[name] = done.json()
            return done.json()

        await answer("health", "GET", "/v1/health")
        await answer("append", "POST", "/v1/subjects/lin/sessions/h1/messages", writer, json={"messages": MESSAGES})
        ended = (await http.post("/v1/subjects/lin/sessions/h1/end", headers=bearer(writer))).json()
        await client.consolidation_result(client.services.temporal.get_workflow_handle(ended["workflow_id"]))
        await answer("entities", "GET", "/v1/subjects/lin/entities", reader)
        await answer("relations", "GET", "/v1/subjects/lin/relations", reader, params={"history": "true"})
        for explain in (False, True):
            body = {"query": "where does Lin live and what about peanuts?", "explain": explain}
            await answer(f"recall explain={explain}", "POST", "/v1/subjects/lin/recall", reader, json=body)
            await answer(f"context explain={explain}", "POST", "/v1/subjects/lin/context", reader, json=body)
        await answer("prompt", "POST", "/v1/subjects/lin/prompt", reader,
                     json={"session_id": "h1", "input": "dinner ideas?", "system": "Be brief."})
        await answer("write_fact", "PUT", "/v1/subjects/lin/facts/food/favourite_dish", writer,
                     json={"value": "dumplings", "expected_version": 0, "evidence_message_ids": ["h1:1"]})
        facts = (await http.get("/v1/subjects/lin/facts", headers=bearer(reader))).json()
        memory_id = next(f["memory_id"] for f in facts if f["value"] == "dumplings")
        await answer("forget", "POST", f"/v1/subjects/lin/memories/{memory_id}/forget", writer, json={"reason": "x"})
        await answer("export", "GET", "/v1/subjects/lin/export", reader)
        await answer("restore", "POST", f"/v1/subjects/lin/memories/{memory_id}/restore", writer, json={})
        put = await http.put("/v1/categories/food", headers=bearer(writer), json={"words": ["dumplings"]})
        assert put.status_code == 200, put.text
        await answer("remove_category", "DELETE", "/v1/categories/food", writer)
        erase = await http.post("/v1/subjects/lin/erasure", headers=bearer(eraser),
                                json={"reason": "art. 17", "request_id": "keys-1"})
        assert erase.status_code == 200, erase.text
        await client.admin.erasure_receipt(client.services.temporal.get_workflow_handle(
            erase.json()["workflow_id"], result_type=ErasureReceipt))
        await answer("erasure", "GET", "/v1/erasures/keys-1", eraser)

    observed = {name: key_paths(body) for name, body in answers.items()}
    assert observed.keys() == RECORDED.keys()
    for name, paths in RECORDED.items():
        assert paths <= observed[name], (name, sorted(paths - observed[name]))
    # An unexplained read carries no explanation keys, not even empty ones.
    assert not {p for p in observed["recall explain=False"] if p.startswith("explanations")}
    assert not {p for p in observed["context explain=False"] if "explanation" in p or p == "below_budget"}
