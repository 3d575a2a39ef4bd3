package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"modelgate/extproc/routing"
	"modelgate/translate/api/spec"
)

// The server's own error replies reach the client as the server wrote
// them. Envoy makes each of the server's immediate responses a local
// reply, which the bootstrap's local_reply_config would rewrite (by status
// for 413 and 500; after a fallback's retries ran out, by the router's
// URX flag) into its generic body with LocalReplyHeader: its first mapper
// now leaves the replies carrying the server's marker alone. Through
// `modelgate serve` behind the stand-in running the generated bootstrap,
// with a provider that answers 500 with nothing in the body, which the
// server answers itself, with an immediate response.
func TestServerRepliesKeptByEnvoy(t *testing.T) {
	var calls atomic.Int64
	empty500 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(empty500.Close)
	cfg := fmt.Sprintf(`limits: {max_request_body_bytes: 2048}
backends:
  - {name: broken, provider: openai, base_url: %[1]q, api_key_env: FAULT_PROVIDER_KEY}
  - {name: broken2, provider: openai, base_url: %[1]q, api_key_env: FAULT_PROVIDER_KEY}
models:
  - {id: plain, deployments: [{backend: broken, model: up}]}
  - {id: all-fail, deployments: [{backend: broken, model: up}, {backend: broken2, model: up, priority: 1}], fallback: {outlier: {consecutive: 100}}}
`, empty500.URL)
	g := serveConfigGateway(t, cfg)
	type apiError struct {
		Error struct{ Message, Type, Code string }
	}
	for i, tt := range []struct {
		name, body string
		status     int
		// mention is a part of the server's message that the mappers'
		// generic bodies lack ("" when the texts are the same).
		mention string
		calls   int64 // of the provider
	}{
		{"413 from the server", `{"model":"plain","messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`, 413, "", 0},
		{"the server's error for a provider's empty 500", `{"model":"plain","messages":[{"role":"user","content":"hi"}]}`, 500, "The provider returned HTTP 500", 1},
		{"after every fallback attempt failed", `{"model":"all-fail","messages":[{"role":"user","content":"hi"}]}`, 500, "The provider returned HTTP 500", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := calls.Load()
			r := g.do(t, fmt.Sprintf("kept-%d", i), "/chat/completions", tt.body, false)
			body := r.body
			if r.status != tt.status {
				t.Fatalf("status %d: %s", r.status, body)
			}
			if v := r.header.Get(routing.LocalReplyHeader); v != "" {
				t.Errorf("%s: %q reached the client: local_reply_config rewrote the server's reply", routing.LocalReplyHeader, v)
			}
			spec.ValidateT(t, "ErrorResponse", body)
			var e apiError
			json.Unmarshal(body, &e)
			if !strings.Contains(e.Error.Message, tt.mention) {
				t.Errorf("message %q, want the server's, which mentions %s", e.Error.Message, tt.mention)
			}
			if got := calls.Load() - before; got != tt.calls {
				t.Errorf("%d calls of the provider, want %d", got, tt.calls)
			}
		})
	}
}
