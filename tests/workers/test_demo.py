"""`agent-memory demo` end to end on the real stack: it leaves a subject to explore and says when
the UI link dies with the stack it started."""

from __future__ import annotations

from agent_memory.api.client import MemoryClient
from agent_memory.providers.factory import providers_for
from workers.demo import DEMO_TENANT, explore_commands, run_demo


async def test_the_demo_keeps_a_subject_to_explore_and_erases_a_copy(services, task_queue):
    report = await run_demo(services, stack_started=True, task_queue=task_queue)
    client = MemoryClient(services, providers_for(services.settings).embedder, task_queue=task_queue)
    kept = await client.facts(DEMO_TENANT, report.subject_id)
    assert kept and not await client.admin.subject_erased(DEMO_TENANT, report.subject_id)
    assert await client.admin.subject_erased(DEMO_TENANT, report.erased_subject_id)
    assert report.erasure.residue_total == 0 and report.facts_after_erasure == 0
    assert report.erasure.data_found
    text = report.render()
    assert "started the embedded stack and has stopped it" in text
    assert "start `agent-memory up` in another terminal and run `agent-memory demo` again" in text
    assert f"agent-memory facts --tenant {DEMO_TENANT} --subject {report.subject_id}" in text
    # The closing commands are the ones tests/cli/runner.py parses.
    assert all(f"  {command}\n" in text + "\n" for command in explore_commands(DEMO_TENANT, report.subject_id))

    reused = await run_demo(services, stack_started=False, task_queue=task_queue)
    assert "has stopped it" not in reused.render() and f"Subject {reused.subject_id} is kept" in reused.render()
