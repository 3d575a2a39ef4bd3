-- The x-request-id a request came with. request_id is the gateway's own
-- id of the request since this migration: a client chooses its
-- x-request-id, and two requests may share one.
ALTER TABLE usage ADD COLUMN client_request_id TEXT NOT NULL DEFAULT '';
