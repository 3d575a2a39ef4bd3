-- The cache writes of each request that live for an hour (Anthropic's and
-- Bedrock's 1h ttl), of its cache_write_tokens; priced apart from the
-- five-minute ones (prices' cache_write_1h_input).
ALTER TABLE usage ADD COLUMN cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0;
