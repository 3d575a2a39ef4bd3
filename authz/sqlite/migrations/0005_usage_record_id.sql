-- Record ids make ledger writes idempotent: a retried batch counts once.
-- Older records have none (NULL, which a unique index lets repeat).
ALTER TABLE usage ADD COLUMN record_id TEXT;
CREATE UNIQUE INDEX usage_record_id ON usage(record_id);
