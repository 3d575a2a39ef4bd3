-- The prompt tokens each request wrote to the provider's prompt cache
-- (priced apart from other input: prices' cache_write_input).
ALTER TABLE usage ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
