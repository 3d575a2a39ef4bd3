package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"modelgate/envoy/routing"
	"modelgate/envoy/standin"
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

// Envoy's own replies reach a client of the Messages API in that API's
// shape, and every client with the request's id: with Envoy 1.36, whose
// local replies skip ext_proc, local_reply_config writes them (the server
// marks a Messages request in the dynamic metadata); with 1.37 the server
// rewrites them itself and records the status the client saw (1.36 shows
// it nothing of them: its record says 499, docs/errors.md). A backend that
// refuses connections makes Envoy answer 503 itself.
func TestEnvoyRepliesInTheClientsShape(t *testing.T) {
	cfg := `backends:
  - {name: down, provider: anthropic, base_url: "http://127.0.0.1:1", api_key_env: FAULT_PROVIDER_KEY}
  - {name: down-openai, provider: openai, base_url: "http://127.0.0.1:1", api_key_env: FAULT_PROVIDER_KEY}
models:
  - {id: claude-down, deployments: [{backend: down, model: claude-up}]}
  - {id: gpt-down, deployments: [{backend: down-openai, model: up}]}
`
	for _, version := range []string{"1.36", "1.37"} {
		t.Run("Envoy "+version, func(t *testing.T) {
			g := serveConfigGateway(t, cfg, standin.WithEnvoyVersion(version))
			for _, tt := range []struct {
				name, path, body string
				check            func(body []byte) bool
			}{
				{"messages", "/messages", `{"model":"claude-down","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, func(b []byte) bool {
					var e struct {
						Type  string
						Error struct{ Type, Message string }
					}
					return json.Unmarshal(b, &e) == nil && e.Type == "error" && e.Error.Type == "overloaded_error" && e.Error.Message != ""
				}},
				{"chat", "/chat/completions", `{"model":"gpt-down","messages":[{"role":"user","content":"hi"}]}`, func(b []byte) bool {
					return spec.Validate("ErrorResponse", b) == nil
				}},
			} {
				id := "envoy-reply-" + version + "-" + tt.name
				r := g.do(t, id, tt.path, tt.body, false)
				if r.status != http.StatusServiceUnavailable || !tt.check(r.body) {
					t.Errorf("%s: %d %s, want 503 in the client's API's shape", tt.name, r.status, r.body)
				}
				got := r.header.Get("X-Request-Id")
				if got == "" || got == id {
					t.Errorf("%s: x-request-id %q, want the gateway's id of the request", tt.name, got)
				}
				row, ok := g.row(t, got, faultSlack)
				if !ok {
					t.Fatalf("%s: no ledger record under the id %q the client got", tt.name, got)
				}
				if version == "1.37" && row.Status != http.StatusServiceUnavailable {
					t.Errorf("%s: ledger status %d, want the 503 the client saw", tt.name, row.Status)
				}
			}
		})
	}
}
