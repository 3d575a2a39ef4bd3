package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"modelgate/authz/ledger"
	"modelgate/authz/postgres"
)

// A request whose headers carry bytes PostgreSQL cannot store (an agent
// session id in Latin-1, a broken UTF-8 sequence) and a client request id
// of 50 KB is recorded, with its labels made storable and bounded, and
// the records of other accounts after it land too. Before, the session id
// failed the ledger's batch on PostgreSQL forever and every later record
// of every account queued behind it.
func TestHostileHeaderBytesAreRecordedOnPostgreSQL(t *testing.T) {
	db, cfgPath, getenv := replicaSetup(t, "")
	r := startReplica(t, cfgPath, getenv)
	keys := map[string]string{}
	for _, account := range []string{"hostile", "bystander"} {
		var out strings.Builder
		if err := run(context.Background(), []string{"keys", "create", "--config", cfgPath, "--account", account},
			env{getenv: getenv, stdout: &out, stderr: &strings.Builder{}}); err != nil {
			t.Fatalf("keys create: %v", err)
		}
		keys[account] = strings.TrimSpace(out.String())
	}
	for i, h := range []map[string]string{
		{"X-Claude-Code-Session-Id": "sess-\xe9t\xe9-\xff"},
		{"Session_id": "\xc3(codex"},
		{"X-Request-Id": strings.Repeat("\xfe-long-id-", 5000)},
	} {
		req, _ := http.NewRequest("POST", r.Gateway+"/chat/completions", strings.NewReader(replicaChat))
		req.Header.Set("Authorization", "Bearer "+keys["hostile"])
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header[k] = []string{v}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d with %q: status %d", i, h, resp.StatusCode)
		}
	}
	for range 5 {
		if status, body := r.call(t, "POST", "/chat/completions", keys["bystander"], replicaChat); status != 200 {
			t.Fatalf("bystander's chat: %d %s", status, body)
		}
	}
	r.stop() // flushes the ledger: every record is written or lost by now

	store, err := postgres.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for account, want := range map[string]int{"hostile": 3, "bystander": 5} {
		acct, err := store.AccountByName(context.Background(), account)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := store.ListRequests(context.Background(), ledger.RequestQuery{AccountID: acct.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != want {
			t.Errorf("%s: %d records in the ledger, want %d", account, len(recs), want)
		}
		for _, rec := range recs {
			for name, s := range map[string]string{"session id": rec.SessionID, "client request id": rec.ClientRequestID} {
				if !utf8.ValidString(s) || len(s) > 128 {
					t.Errorf("%s: %s %q (%d bytes), want valid UTF-8 of at most 128 bytes", account, name, s, len(s))
				}
			}
		}
	}
}
