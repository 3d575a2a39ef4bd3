-- The model name the client sent (an alias of the configured model in
-- the model column, or that name itself) and the provider's own id of the
-- model the request was sent to; empty for the requests recorded before
-- this migration.
ALTER TABLE usage ADD COLUMN requested_model TEXT NOT NULL DEFAULT '';
ALTER TABLE usage ADD COLUMN provider_model TEXT NOT NULL DEFAULT '';
