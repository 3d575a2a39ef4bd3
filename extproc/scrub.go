package extproc

import (
	"slices"

	"modelgate/extproc/redact"
)

// scrubCredentials hides, in a provider's error as the client gets it (an
// error answer, or a stream's error event), the credentials a provider
// may quote back ("Incorrect API key provided: sk-…"): the backends',
// the request's own (a minted access token), and every credential format
// capture redaction knows (redact.Rules.Scrub). A client never reads the
// operator's key.
func (s *Server) scrubCredentials(out []byte, requestKey string) []byte {
	r := redact.Rules{Secrets: s.secrets}
	if len(requestKey) >= redact.MinSecretLen {
		r.Secrets = append(slices.Clip(r.Secrets), requestKey)
	}
	if scrubbed := r.Scrub(string(out)); scrubbed != string(out) {
		return []byte(scrubbed)
	}
	return out
}
