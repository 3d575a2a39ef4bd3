-- The web searches the provider ran for each request's answer (Anthropic's
-- server_tool_use.web_search_requests, OpenAI's web_search_call items,
-- Gemini's grounded queries), billed apart from tokens and priced at
-- prices' web_search.
ALTER TABLE usage ADD COLUMN web_search_requests INTEGER NOT NULL DEFAULT 0;
