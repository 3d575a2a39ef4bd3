CREATE TABLE groups (
	id                  text PRIMARY KEY,
	name                text NOT NULL UNIQUE,
	models              text[] NOT NULL DEFAULT '{}',
	requests_per_minute bigint,
	tokens_per_minute   bigint,
	tokens_per_day      bigint,
	concurrent_requests bigint,
	created_at          timestamptz NOT NULL
);

CREATE TABLE accounts (
	id                  text PRIMARY KEY,
	name                text NOT NULL UNIQUE,
	group_id            text REFERENCES groups (id),
	models              text[] NOT NULL DEFAULT '{}',
	disabled            boolean NOT NULL DEFAULT false,
	requests_per_minute bigint,
	tokens_per_minute   bigint,
	tokens_per_day      bigint,
	concurrent_requests bigint,
	created_at          timestamptz NOT NULL
);
CREATE INDEX accounts_group ON accounts (group_id);

CREATE TABLE keys (
	id           text PRIMARY KEY,
	-- seq orders keys created within the same millisecond.
	seq          bigint GENERATED ALWAYS AS IDENTITY,
	account_id   text NOT NULL REFERENCES accounts (id),
	name         text NOT NULL DEFAULT '',
	prefix       text NOT NULL,
	hash         bytea NOT NULL UNIQUE,
	models       text[] NOT NULL DEFAULT '{}',
	disabled     boolean NOT NULL DEFAULT false,
	expires_at   timestamptz,
	revoked_at   timestamptz,
	created_at   timestamptz NOT NULL,
	last_used_at timestamptz
);
CREATE INDEX keys_prefix ON keys (prefix);
CREATE INDEX keys_account ON keys (account_id, created_at, seq);

-- The usage ledger: append-only, no foreign keys, so that recording a
-- request never waits on or fails for account changes.
CREATE TABLE usage (
	request_id        text NOT NULL,
	key_id            text NOT NULL,
	account_id        text NOT NULL,
	endpoint          text NOT NULL,
	model             text NOT NULL,
	backend           text NOT NULL,
	status            integer NOT NULL,
	prompt_tokens     bigint NOT NULL,
	completion_tokens bigint NOT NULL,
	total_tokens      bigint NOT NULL,
	cached_tokens     bigint NOT NULL,
	reasoning_tokens  bigint NOT NULL,
	duration_ms       bigint NOT NULL,
	at                timestamptz NOT NULL
);
CREATE INDEX usage_account_at ON usage (account_id, at);
CREATE INDEX usage_key_at ON usage (key_id, at);
CREATE INDEX usage_at ON usage (at);

CREATE TABLE responses (
	id         text PRIMARY KEY,
	account_id text NOT NULL,
	items      bytea NOT NULL,
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX responses_expires ON responses (expires_at);

CREATE TABLE images (
	id           text PRIMARY KEY,
	account_id   text NOT NULL,
	content_type text NOT NULL,
	data         bytea NOT NULL,
	created_at   timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL
);
CREATE INDEX images_expires ON images (expires_at);
