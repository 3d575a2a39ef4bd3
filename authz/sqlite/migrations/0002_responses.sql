CREATE TABLE responses (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL,
	items      BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE INDEX responses_expires ON responses(expires_at);
