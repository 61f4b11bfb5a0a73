"""A webhook delivery as a durable flow: one run per delivery (workflow id
`webhook-delivery-<delivery id>`, `-r<n>` for an operator's n-th re-delivery), started after the
commit that wrote the delivery, or by the sweep.

It reads the deployment's retry bounds once (recorded in the history), then POSTs the delivery
(activity `deliver_webhook`) under a retry policy with exponential backoff and that many attempts.
When the attempts are exhausted, or the receiver refused the delivery (a 4xx other than 408 and
429) or its endpoint was removed, the delivery is dead-lettered (`mark_webhook_dead`) for an
operator to re-deliver. History carries ids, status codes and error texts only; the URL, the
secret and the payload stay in PostgreSQL.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict
from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.webhooks import WebhookActivities, WebhookDeadInput
    from agent_memory.core import contract
    from agent_memory.memory.webhooks import WebhookDeliveryInput


class WebhookDeliveryResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    delivery_id: str
    # delivered: a 2xx; dead: dead-lettered; gone: the delivery was erased or swept meanwhile.
    status: Literal["delivered", "dead", "gone"]
    status_code: int | None = None
    error: str | None = None


@workflow.defn(name=contract.WEBHOOK_DELIVERY_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class WebhookDeliveryWorkflow:
    @workflow.run
    async def run(self, request: WebhookDeliveryInput) -> WebhookDeliveryResult:
        bounds = await workflow.execute_local_activity_method(
            WebhookActivities.webhook_retry_policy, request, **contract.STORE_WRITE.local_options())
        attempts, first, longest = bounds.max_attempts, bounds.initial_retry_seconds, bounds.max_retry_seconds
        try:
            outcome = await workflow.execute_activity_method(
                WebhookActivities.deliver_webhook, request,
                **contract.WEBHOOK_DELIVERY.bounded(attempts, first, longest).options())
        except ActivityError as err:
            cause = err.cause
            # An attempt that got as far as an answer (or none) recorded it on the delivery; a
            # timeout of the activity itself did not.
            recorded = isinstance(cause, ApplicationError)
            error = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            await workflow.execute_local_activity_method(
                WebhookActivities.mark_webhook_dead,
                WebhookDeadInput(tenant_id=request.tenant_id, delivery_id=request.delivery_id,
                                 error=None if recorded else error),
                **contract.STORE_WRITE.local_options())
            workflow.logger.warning("webhook delivery %s dead-lettered: %s", request.delivery_id, error)
            return WebhookDeliveryResult(delivery_id=request.delivery_id, status="dead", error=error)
        if outcome.status == "dead":
            return WebhookDeliveryResult(delivery_id=request.delivery_id, status="dead")
        return WebhookDeliveryResult(delivery_id=request.delivery_id, status=outcome.status,
                                     status_code=outcome.status_code)
