-- The optional guardrail rules of the config file that a group, an
-- account or a key adds to its requests, by name, as model lists are
-- stored; empty when it adds none.
ALTER TABLE groups ADD COLUMN guardrails text[] NOT NULL DEFAULT '{}';
ALTER TABLE accounts ADD COLUMN guardrails text[] NOT NULL DEFAULT '{}';
ALTER TABLE keys ADD COLUMN guardrails text[] NOT NULL DEFAULT '{}';
