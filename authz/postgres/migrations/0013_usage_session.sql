-- The agent session each request belongs to, as its client names it
-- (Claude Code's x-claude-code-session-id, Codex's session_id); empty
-- when it names none.
ALTER TABLE usage ADD COLUMN session_id text NOT NULL DEFAULT '';
