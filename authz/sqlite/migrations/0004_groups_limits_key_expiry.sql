CREATE TABLE groups (
	id                  TEXT PRIMARY KEY,
	name                TEXT NOT NULL UNIQUE,
	models              TEXT NOT NULL DEFAULT '',
	requests_per_minute INTEGER,
	tokens_per_minute   INTEGER,
	tokens_per_day      INTEGER,
	concurrent_requests INTEGER,
	created_at          INTEGER NOT NULL
);
ALTER TABLE accounts ADD COLUMN group_id TEXT REFERENCES groups(id);
ALTER TABLE accounts ADD COLUMN models TEXT NOT NULL DEFAULT '';
ALTER TABLE accounts ADD COLUMN requests_per_minute INTEGER;
ALTER TABLE accounts ADD COLUMN tokens_per_minute INTEGER;
ALTER TABLE accounts ADD COLUMN tokens_per_day INTEGER;
ALTER TABLE accounts ADD COLUMN concurrent_requests INTEGER;
CREATE INDEX accounts_group ON accounts(group_id);
ALTER TABLE keys ADD COLUMN expires_at INTEGER;
ALTER TABLE keys ADD COLUMN last_used_at INTEGER;
CREATE INDEX usage_key_at ON usage(key_id, at);
CREATE INDEX usage_at ON usage(at);
