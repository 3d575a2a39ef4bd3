package extproc_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"modelgate/authz"
	"modelgate/authz/sqlite"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
	"modelgate/translate/api/spec"
)

// A backend with a token source (Vertex AI) gets a fresh bearer token per
// request, and a failing token source is a 502, not a request upstream.
func TestBackendTokenSource(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct, _ := store.CreateAccount(ctx, "acme")
	key, _, _ := authz.CreateKey(ctx, store, acct.ID, "", nil)
	fail := false
	token := func(context.Context) (string, error) {
		if fail {
			return "", errors.New("token endpoint down")
		}
		return "ya29.minted", nil
	}
	srv, err := extproc.New(extproc.Config{
		Routing: routing.Table{Backends: []routing.Backend{{Name: "vx", Provider: "vertex", Project: "proj", Region: "us-central1"}},
			Models: []routing.Model{{ID: "gemini", Deployments: []routing.Deployment{{Backend: "vx", Model: "gemini-2.0-flash"}}}}},
		Credentials: map[string]extproc.Credentials{"vx": {Token: token}},
	}, authz.NewAuthenticator(store, authz.AuthenticatorConfig{}), store)
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := os.ReadFile("../testdata/fixtures/gemini/vertex/test_google_model_vertex_provider.bodies/00.response.json")
	if err != nil {
		t.Fatal(err)
	}
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(recorded)
	})
	gw := extproctest.Start(t, srv, extproctest.Config{Backends: map[string]http.Handler{"vx": upstream}})
	body := `{"model":"gemini","messages":[{"role":"user","content":"What is the capital of France?"}]}`
	res := gw.Post(t, "/v1/chat/completions", key, body)
	spec.ValidateT(t, "CreateChatCompletionResponse", res.Body)
	got := res.Upstream["vx"]
	if res.Status != 200 || len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer ya29.minted" ||
		got[0].Path != "/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent" {
		t.Fatalf("status %d, upstream %+v", res.Status, got)
	}
	fail = true
	res = gw.Post(t, "/v1/chat/completions", key, body)
	if res.Status != 502 || len(res.Upstream["vx"]) != 0 {
		t.Errorf("failing token source: status %d, %d upstream calls; want 502 and none", res.Status, len(res.Upstream["vx"]))
	}
	spec.ValidateT(t, "ErrorResponse", res.Body)
}
