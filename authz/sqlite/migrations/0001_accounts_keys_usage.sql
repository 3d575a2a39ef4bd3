CREATE TABLE accounts (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	disabled   INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL
);
CREATE TABLE keys (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts(id),
	name       TEXT NOT NULL DEFAULT '',
	prefix     TEXT NOT NULL,
	hash       BLOB NOT NULL UNIQUE,
	models     TEXT NOT NULL DEFAULT '',
	disabled   INTEGER NOT NULL DEFAULT 0,
	revoked_at INTEGER,
	created_at INTEGER NOT NULL
);
CREATE INDEX keys_prefix ON keys(prefix);
CREATE INDEX keys_account ON keys(account_id);
CREATE TABLE usage (
	request_id        TEXT NOT NULL,
	key_id            TEXT NOT NULL,
	account_id        TEXT NOT NULL,
	endpoint          TEXT NOT NULL,
	model             TEXT NOT NULL,
	backend           TEXT NOT NULL,
	status            INTEGER NOT NULL,
	prompt_tokens     INTEGER NOT NULL,
	completion_tokens INTEGER NOT NULL,
	total_tokens      INTEGER NOT NULL,
	cached_tokens     INTEGER NOT NULL,
	reasoning_tokens  INTEGER NOT NULL,
	duration_ms       INTEGER NOT NULL,
	at                INTEGER NOT NULL
);
CREATE INDEX usage_account_at ON usage(account_id, at);
