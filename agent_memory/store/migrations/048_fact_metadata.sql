-- Metadata on a fact written by an agent or an app (agent_memory/memory/corrections.py,
-- write_fact): the same bounded shape as a message's (migration 042), carried by the fact's event
-- (so a rebuild reproduces it, and its payload is shredded with the subject's key) and stored on
-- the interval it opens. The metadata filter keeps a fact whose own metadata holds the pairs, or
-- one citing a message whose metadata does. A constant default adds the column without a rewrite.
ALTER TABLE public.facts ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE public.facts ADD CONSTRAINT facts_metadata_object CHECK (jsonb_typeof(metadata) = 'object') NOT VALID;
