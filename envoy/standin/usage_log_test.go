package standin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"modelgate/authz"
	"modelgate/authz/sqlite"
	"modelgate/cmd/mockprovider/replay"
	"modelgate/envoy"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/testdata"
)

// The generated access log, behind the real ext_proc server: every usage
// field the log asks for is one the server writes, so a key renamed on
// either side fails here.
func TestAccessLogCarriesTheServersUsage(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	acct, err := store.CreateAccount(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := authz.CreateKey(ctx, store, acct.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	const providerKey = "provider-secret-key-123"
	srv, err := extproc.New(extproc.Config{
		Routing: routing.Table{Backends: []routing.Backend{{Name: "main", Provider: "openai"}},
			Models: []routing.Model{{ID: "gpt-4o", OwnedBy: "openai", Deployments: []routing.Deployment{{Backend: "main", Model: "gpt-5-nano"}}}}},
		Credentials: map[string]extproc.Credentials{"main": {APIKey: providerKey}},
	}, authz.NewAuthenticator(store, authz.AuthenticatorConfig{}), store)
	if err != nil {
		t.Fatal(err)
	}
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: providerKey})
	if err != nil {
		t.Fatal(err)
	}
	gw := extproctest.Start(t, srv, extproctest.Config{Backends: map[string]http.Handler{"main": mock}})

	res := gw.Post(t, "/v1/chat/completions", key, `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello!"}]}`)
	if res.Status != 200 {
		t.Fatalf("status %d: %s", res.Status, res.Body)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(res.Log.Line), &line); err != nil {
		t.Fatalf("access log line %q: %v", res.Log.Line, err)
	}
	md := res.Log.Metadata["io.modelgate"]
	for _, k := range envoy.UsageKeys {
		if line[k] == nil || line[k] != md[k] {
			t.Errorf("access log %s = %v, want the server's %v", k, line[k], md[k])
		}
	}
	if line["model"] != "gpt-4o" || line["backend"] != "main" || line["prompt_tokens"].(float64) <= 0 ||
		line["total_tokens"] != line["prompt_tokens"].(float64)+line["completion_tokens"].(float64) {
		t.Errorf("usage in the access log: %s", res.Log.Line)
	}
	if line["status"] != 200.0 || line["request_id"] != res.Header.Get("X-Request-Id") || line["route"] != "main" ||
		line["upstream_cluster"] != "main" || line["path"] != res.Upstream["main"][0].Path || line["response_flags"] != "-" {
		t.Errorf("access log line %s; response request id %q, upstream path %q", res.Log.Line, res.Header.Get("X-Request-Id"), res.Upstream["main"][0].Path)
	}

	// Refused by the server: its status, and no usage.
	res = gw.Post(t, "/v1/chat/completions", "sk-not-a-key", `{"model":"gpt-4o","messages":[]}`)
	if err := json.Unmarshal([]byte(res.Log.Line), &line); err != nil {
		t.Fatal(err)
	}
	if res.Status != 401 || line["status"] != 401.0 || line["prompt_tokens"] != nil || !strings.Contains(res.Log.Line, `"model":null`) {
		t.Errorf("401 logged as %s", res.Log.Line)
	}
}
