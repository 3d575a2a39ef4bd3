-- What the guardrail rules that ran for each request did, in the order
-- they ran: a JSON array of [rule, phase, result] arrays, so that a rule's
-- name (free text from the config file) cannot be mistaken for a result;
-- empty when none ran, as for the requests recorded before this migration.
ALTER TABLE usage ADD COLUMN guardrails TEXT NOT NULL DEFAULT '';
