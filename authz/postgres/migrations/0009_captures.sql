-- Payload captures (opt-in): an exchange's bodies, redacted.
CREATE TABLE captures (
  request_id         text        NOT NULL,
  at                 timestamptz NOT NULL,
  account_id         text        NOT NULL DEFAULT '',
  key_id             text        NOT NULL DEFAULT '',
  endpoint           text        NOT NULL,
  model              text        NOT NULL,
  status             integer     NOT NULL,
  request            text        NOT NULL,
  response           text        NOT NULL,
  request_truncated  boolean     NOT NULL,
  response_truncated boolean     NOT NULL
);
CREATE INDEX captures_request ON captures (request_id);
CREATE INDEX captures_at ON captures (at);
-- The dashboard's requests page pages the ledger newest first.
CREATE INDEX usage_at_request ON usage (at, request_id);
