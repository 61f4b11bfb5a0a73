-- What an app knows about a message besides its words (the channel, the app, a ticket): a few
-- short scalar values per message (agent_memory/core/models.py, Message.metadata). Recall and
-- the assembled context keep, on request, only the memories citing a message whose metadata
-- holds given pairs. Evidence like the rest of the row: erased with the subject's messages.
-- A constant default adds the column without rewriting the table; every existing row holds it,
-- so the check need not scan them (NOT VALID still checks every new row).
ALTER TABLE public.messages ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE public.messages ADD CONSTRAINT messages_metadata_object CHECK (jsonb_typeof(metadata) = 'object') NOT VALID;
