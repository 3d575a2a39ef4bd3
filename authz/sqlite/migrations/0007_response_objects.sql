-- The Response object as the client got it, for GET /v1/responses/{id},
-- and how many items of the conversation came before its output, for
-- GET /v1/responses/{id}/input_items. Both are NULL for responses stored
-- before: those can be continued and deleted, not retrieved.
ALTER TABLE responses ADD COLUMN response BLOB;
ALTER TABLE responses ADD COLUMN inputs INTEGER;
