// Package anthropic translates OpenAI chat completions to and from
// Anthropic's Messages API: system and developer messages become the
// top-level system prompt, tool calls and results become tool_use and
// tool_result blocks, and the typed SSE events (message_start,
// content_block_*, message_delta, message_stop, ping, error) become
// chat.completion.chunk events with the same text, tool-call argument
// deltas, finish reason and usage.
package anthropic
