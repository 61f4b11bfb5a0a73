-- A candidate that was corroborated and became a current fact is 'promoted', not 'closed':
-- as-of reads return closed facts (true until they changed), never former candidates.
ALTER TABLE facts DROP CONSTRAINT facts_status_check;
ALTER TABLE facts ADD CONSTRAINT facts_status_check
    CHECK (status IN ('active', 'candidate', 'closed', 'promoted'));
