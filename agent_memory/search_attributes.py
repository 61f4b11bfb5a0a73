"""The custom search attributes every workflow carries (registered by `agent-memory up` and by
the production compose file); operators filter on them in the Temporal UI."""

from temporalio.common import SearchAttributeKey

TENANT_ID = SearchAttributeKey.for_keyword("TenantId")
SUBJECT_ID = SearchAttributeKey.for_keyword("SubjectId")
SESSION_ID = SearchAttributeKey.for_keyword("SessionId")
