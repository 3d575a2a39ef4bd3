package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Agents' vendor ids reach the operator's models through aliases, on
// every front door: an exact name or the longest prefix names the model,
// which serves, is recorded and is what per-key access allows; /v1/models
// lists the models, not their aliases.
func TestModelAliases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "aliases.yaml")
	cfg := `backends:
  - {name: mock, provider: openai, base_url: "http://unused", api_key_env: UNUSED}
  - {name: mock-anthropic, provider: anthropic, base_url: "http://unused", api_key_env: UNUSED}
models:
  - id: g-claude
    aliases: ["claude-sonnet-4-5*", "claude-haiku-*"]
    deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}]
  - id: g-gpt
    aliases: ["gpt-5-codex*"]
    deployments: [{backend: mock, model: mock-agent}]
  - id: g-fallback
    aliases: ["fb-*"]
    deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}, {backend: mock, model: mock-agent, priority: 1}]
    fallback: {retry_on: [5xx]}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startDev(t, func(string) string { return "" }, "--config", path)
	for _, tt := range []struct{ door, name, model, body string }{
		{"messages", "claude-sonnet-4-5-20250929", "g-claude", `{"model":%q,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages", "claude-haiku-4-5-20251001", "g-claude", `{"model":%q,"max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages/count_tokens", "claude-haiku-4-5-20251001", "g-claude", `{"model":%q,"messages":[{"role":"user","content":"hi"}]}`},
		{"chat/completions", "gpt-5-codex-mini", "g-gpt", `{"model":%q,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "gpt-5-codex", "g-gpt", `{"model":%q,"input":"hi"}`},
		{"chat/completions", "claude-sonnet-4-5", "g-claude", `{"model":%q,"messages":[{"role":"user","content":"hi"}]}`},
		{"chat/completions", "fb-1", "g-fallback", `{"model":%q,"messages":[{"role":"user","content":"hi"}]}`}, // the attempts resolve it too
	} {
		d := guardDoor{name: strings.Split(tt.door, "/")[0], path: "/" + tt.door}
		id := fmt.Sprintf("alias-%d", guardRequests.Add(1))
		res, body := guardCall(t, a, d, fmt.Sprintf(tt.body, tt.name), id)
		if res.StatusCode != 200 {
			t.Errorf("%s %s: %d %s", tt.door, tt.name, res.StatusCode, body)
			continue
		}
		if got := recordModel(t, a, id); got != tt.model {
			t.Errorf("%s %s: recorded as %q, want %q", tt.door, tt.name, got, tt.model)
		}
	}
	res, body := guardCall(t, a, guardDoors[0], guardDoors[0].body("gpt-5", "hi", false), "")
	if res.StatusCode != 404 || !strings.Contains(string(body), "model_not_found") {
		t.Errorf("a name no alias takes: %d %s", res.StatusCode, body)
	}

	// Per-key access is to the model an alias names.
	_, list := a.admin(t, "GET", "/admin/v1/accounts", "")
	var accounts struct{ Data []struct{ ID string } }
	json.Unmarshal(list, &accounts) //nolint:errcheck // an empty list fails below
	if len(accounts.Data) == 0 {
		t.Fatalf("accounts: %s", list)
	}
	_, created := a.admin(t, "POST", "/admin/v1/accounts/"+accounts.Data[0].ID+"/keys", `{"name":"gpt only","models":["g-gpt"]}`)
	var key struct{ Secret string }
	if json.Unmarshal(created, &key) != nil || key.Secret == "" {
		t.Fatalf("creating a key: %s", created)
	}
	if status, body := send(t, "POST", a.Gateway+"/chat/completions", key.Secret, "application/json", `{"model":"gpt-5-codex-mini","messages":[{"role":"user","content":"hi"}]}`); status != 200 {
		t.Errorf("the key's model through its alias: %d %s", status, body)
	}
	if status, body := send(t, "POST", a.Gateway+"/chat/completions", key.Secret, "application/json", `{"model":"claude-sonnet-4-5-20250929","messages":[{"role":"user","content":"hi"}]}`); status != 403 {
		t.Errorf("another model through its alias: %d %s", status, body)
	}

	_, models := a.call(t, "GET", "/models", a.APIKey, "")
	var page struct{ Data []struct{ ID string } }
	if err := json.Unmarshal(models, &page); err != nil || len(page.Data) != 3 || page.Data[0].ID != "g-claude" || page.Data[1].ID != "g-gpt" {
		t.Errorf("/v1/models: %s", models)
	}
}

// recordModel is the model the ledger recorded for the request the client
// named id, once it is written (the ledger writes after the answer).
func recordModel(t *testing.T, a devAddrs, id string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, body := a.admin(t, "GET", "/admin/v1/requests?limit=50", "")
		var page struct {
			Data []struct {
				ClientRequestID string `json:"client_request_id"`
				Model           string
			}
		}
		json.Unmarshal(body, &page) //nolint:errcheck // an empty page waits
		for _, r := range page.Data {
			if r.ClientRequestID == id {
				return r.Model
			}
		}
	}
	return ""
}
