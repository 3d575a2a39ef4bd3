package extproc

import (
	"bytes"
	"encoding/json"

	"modelgate/translate/api"
)

// Estimates stand in for the provider's usage where an exchange consumed
// tokens but the provider never reported them: a stream the client left, a
// provider that stalled or reset, a timeout. They are rough on purpose
// (four bytes of text a token, as OpenAI's own rule of thumb) and marked
// as estimated in the ledger.
const bytesPerToken = 4

// promptEstimate estimates the prompt tokens of a JSON request body: its
// bytes without the inline files (data: URLs of images, audio and PDFs),
// which providers count by other rules and which would make a one-image
// request reserve a day's budget.
func promptEstimate(body []byte) int64 {
	n := len(body)
	for rest := body; ; {
		i := bytes.Index(rest, []byte(`"data:`))
		if i < 0 {
			break
		}
		rest = rest[i+1:]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			break
		}
		n -= end
		rest = rest[end+1:]
	}
	return tokensOf(n)
}

func tokensOf(n int) int64 { return int64((n + bytesPerToken - 1) / bytesPerToken) }

// maxOutputTokens is a request's own bound on its answer, from its
// members: OpenAI's max_completion_tokens or max_tokens, or the Responses
// API's max_output_tokens; zero when it sets none.
func maxOutputTokens(members map[string]json.RawMessage) int64 {
	return api.PositiveInteger(members, "max_completion_tokens", "max_tokens", "max_output_tokens")
}
