package main

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two accounts that send the same x-request-id each see only their own
// request: the ledger, captures and the admin's views are keyed by the
// gateway's own id, and the client's is kept beside it. Before, the second
// request's capture was what the admin saw of the first.
func TestClientRequestIDsDoNotCollide(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "modelgate.yaml")
	conf := `backends:
  - {name: mock, provider: openai, base_url: "http://127.0.0.1:1"}
models:
  - {id: gpt-4o-mini, deployments: [{backend: mock, model: gpt-4o-mini}]}
observability:
  capture: {to: store}
`
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := launchDev(t, func(string) string { return "" }, io.Discard, "--data-dir", dir, "--config", path)
	status, body := a.admin(t, "POST", "/admin/v1/accounts", `{"name":"other"}`)
	var acct struct{ ID string }
	if json.Unmarshal(body, &acct); status/100 != 2 || acct.ID == "" {
		t.Fatalf("creating an account: %d %s", status, body)
	}
	status, body = a.admin(t, "POST", "/admin/v1/accounts/"+acct.ID+"/keys", `{"name":"k"}`)
	var created struct{ Secret string }
	if json.Unmarshal(body, &created); status/100 != 2 || created.Secret == "" {
		t.Fatalf("creating a key: %d %s", status, body)
	}
	texts := map[string]string{a.APIKey: "first account's question", created.Secret: "second account's question"}
	gatewayIDs := map[string]string{}
	for _, key := range []string{a.APIKey, created.Secret} {
		req, _ := http.NewRequest("POST", a.Gateway+"/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+texts[key]+`"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", "same-id")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		id := resp.Header.Get("X-Request-Id")
		if resp.StatusCode != 200 || id == "" || id == "same-id" {
			t.Fatalf("status %d, x-request-id %q: want 200 and the gateway's own id", resp.StatusCode, id)
		}
		gatewayIDs[key] = id
	}
	if gatewayIDs[a.APIKey] == gatewayIDs[created.Secret] {
		t.Fatal("two requests got one id")
	}
	type request struct {
		RequestID       string `json:"request_id"`
		ClientRequestID string `json:"client_request_id"`
		AccountID       string `json:"account_id"`
	}
	var page struct{ Data []request }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body = a.admin(t, "GET", "/admin/v1/requests?limit=50", "")
		page.Data = nil
		json.Unmarshal(body, &page)
		if len(page.Data) >= 2 || time.Now().After(deadline) {
			break // the ledger writes in batches
		}
	}
	seen := map[string]bool{}
	for _, r := range page.Data {
		if r.ClientRequestID == "same-id" {
			seen[r.RequestID] = true
		}
	}
	if len(seen) != 2 || !seen[gatewayIDs[a.APIKey]] || !seen[gatewayIDs[created.Secret]] {
		t.Fatalf("requests %s: want both, each under its own id with the client's id beside it", body)
	}
	for key, id := range gatewayIDs {
		other := texts[created.Secret]
		if key == created.Secret {
			other = texts[a.APIKey]
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, body = a.admin(t, "GET", "/admin/v1/requests/"+id, "")
			if !strings.Contains(string(body), `"capture":null`) || time.Now().After(deadline) {
				break // captures are queued for the store, as usage records are
			}
		}
		if !strings.Contains(string(body), texts[key]) || strings.Contains(string(body), other) {
			t.Errorf("admin API, request %s: %s; want its own capture only", id, body)
		}
		page := html.UnescapeString(dashboardPage(t, a, "/admin/requests/"+id))
		if !strings.Contains(page, texts[key]) || strings.Contains(page, other) {
			t.Errorf("dashboard, request %s: want its own capture only", id)
		}
	}
}
