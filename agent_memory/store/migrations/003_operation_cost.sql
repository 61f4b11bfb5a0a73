-- Cost of each provider call, next to its token counts.
ALTER TABLE operations ADD COLUMN cost_usd numeric(12, 6) NOT NULL DEFAULT 0;
