-- The optional guardrail rules of the config file that a group, an
-- account or a key adds to its requests, by name: comma-separated, as
-- model lists are (the names hold no commas); empty when it adds none.
ALTER TABLE groups ADD COLUMN guardrails TEXT NOT NULL DEFAULT '';
ALTER TABLE accounts ADD COLUMN guardrails TEXT NOT NULL DEFAULT '';
ALTER TABLE keys ADD COLUMN guardrails TEXT NOT NULL DEFAULT '';
