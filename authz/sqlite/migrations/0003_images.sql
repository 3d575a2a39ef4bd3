CREATE TABLE images (
	id           TEXT PRIMARY KEY,
	account_id   TEXT NOT NULL,
	content_type TEXT NOT NULL,
	data         BLOB NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL
);
CREATE INDEX images_expires ON images(expires_at);
