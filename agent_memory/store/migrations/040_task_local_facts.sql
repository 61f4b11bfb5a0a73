-- A task-local fact ("use the staging database for this", "the meeting room is B2 today") holds
-- only inside the session it was stated in: recall shows it in that session's context and prompt,
-- never in another's. The session is kept beside the fact; null for every other permanence.
ALTER TABLE facts ADD COLUMN task_session_id text;
