package responses

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"modelgate/translate/api"
)

// A provider's thinking that must go back to it on the next turn
// (api.ThinkingBlock: Claude's signed thinking) reaches a Responses client
// as a reasoning item's encrypted_content, which clients send back
// unchanged, in stored conversations and stateless ones (Codex sends
// store: false and include: ["reasoning.encrypted_content"]). The bridge
// restores it, in order, to the assistant turn that follows the item. It
// is opaque to the client, not encrypted: the provider checks it by its
// signatures.

// sealThinking is the encrypted_content of a reasoning item holding blocks.
func sealThinking(blocks []api.ThinkingBlock) string {
	b, _ := json.Marshal(blocks)
	return thinkingPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// unsealThinking is the thinking a reasoning item's encrypted_content
// holds; false for another's (OpenAI's) or a damaged one.
func unsealThinking(content string) ([]api.ThinkingBlock, bool) {
	rest, ok := strings.CutPrefix(content, thinkingPrefix)
	if !ok {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	var blocks []api.ThinkingBlock
	if err != nil || json.Unmarshal(b, &blocks) != nil {
		return nil, false
	}
	return blocks, true
}

// reasoningItem is the reasoning item of text and blocks: the text as its
// summary, the blocks as its encrypted_content.
func reasoningItem(id, text string, blocks []api.ThinkingBlock) map[string]any {
	summary := []any{}
	if text != "" {
		summary = append(summary, summaryPart(text))
	}
	it := map[string]any{"type": "reasoning", "id": id, "summary": summary}
	if len(blocks) > 0 {
		it["encrypted_content"] = sealThinking(blocks)
	}
	return it
}
