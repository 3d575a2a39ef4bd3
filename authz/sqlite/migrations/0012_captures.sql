-- Payload captures (opt-in): an exchange's bodies, redacted.
CREATE TABLE captures (
  request_id         TEXT    NOT NULL,
  at                 INTEGER NOT NULL,
  account_id         TEXT    NOT NULL DEFAULT '',
  key_id             TEXT    NOT NULL DEFAULT '',
  endpoint           TEXT    NOT NULL,
  model              TEXT    NOT NULL,
  status             INTEGER NOT NULL,
  request            TEXT    NOT NULL,
  response           TEXT    NOT NULL,
  request_truncated  INTEGER NOT NULL,
  response_truncated INTEGER NOT NULL
);
CREATE INDEX captures_request ON captures (request_id);
CREATE INDEX captures_at ON captures (at);
-- The dashboard's requests page pages the ledger newest first.
CREATE INDEX usage_at_request ON usage (at, request_id);
