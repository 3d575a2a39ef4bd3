package extproc_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/sqlite"
	"modelgate/envoy/routing"
	"modelgate/extproc"
	"modelgate/extproc/extproctest"
)

// A client that leaves mid-stream still gets its usage recorded: the
// ledger must not lose what the provider already reported.
func TestUsageRecordedWhenClientLeavesMidStream(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct, _ := store.CreateAccount(ctx, "acme")
	key, _, _ := authz.CreateKey(ctx, store, acct.ID, "", nil)
	srv, err := extproc.New(extproc.Config{
		Routing: routing.Table{Backends: []routing.Backend{{Name: "main", Provider: "openai"}},
			Models: []routing.Model{{ID: "m", Deployments: []routing.Deployment{{Backend: "main", Model: "m"}}}}},
	}, authz.NewAuthenticator(store, authz.AuthenticatorConfig{}), store)
	if err != nil {
		t.Fatal(err)
	}
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8}}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a long generation the client abandons
	})
	gw := extproctest.Start(t, srv, extproctest.Config{Backends: map[string]http.Handler{"main": upstream}})
	reqCtx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(reqCtx, "POST", gw.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line = %q", line)
	}
	cancel()
	resp.Body.Close()
	var totals ledger.UsageTotals
	for range 200 {
		if totals, _ = store.UsageSince(ctx, acct.ID, time.Time{}); totals.Requests > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if totals.Requests != 1 || totals.PromptTokens != 7 {
		t.Errorf("usage after the client left = %+v, want 1 request with 7 prompt tokens", totals)
	}
}
