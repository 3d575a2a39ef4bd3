package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/postgres"
)

// postgresURLEnv names the database the PostgreSQL tests use; CI sets it
// to postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const postgresURLEnv = "MODELGATE_TEST_POSTGRES_URL"

// postgresSchema creates a schema of its own for the test, dropped at
// cleanup, and returns the test database's URL with it as search_path. It
// skips when postgresURLEnv is unset and fails when the server cannot be
// reached.
func postgresSchema(t *testing.T) string {
	t.Helper()
	base := os.Getenv(postgresURLEnv)
	if base == "" {
		t.Skipf("%s is unset: set it to a PostgreSQL database (CI uses postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the replica tests", postgresURLEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connecting to %s: %v", postgresURLEnv, err)
	}
	defer c.Close(context.Background())
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	schema := "modelgate_test_" + hex.EncodeToString(b[:])
	if _, err := c.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	if !strings.HasPrefix(base, "postgres://") && !strings.HasPrefix(base, "postgresql://") {
		return base + " search_path=" + schema
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parsing %s: %v", postgresURLEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// replicaConfig is a config on the PostgreSQL in $MODELGATE_REPLICA_DB,
// with the image URL key replicas share, served by dev's built-in mock
// providers.
const replicaConfig = `
storage: {postgres_url_env: MODELGATE_REPLICA_DB}
images: {url_key_env: MODELGATE_REPLICA_IMAGE_KEY}
backends:
  - {name: mock, provider: openai, base_url: "http://127.0.0.1:1"}
  - {name: mock-anthropic, provider: anthropic, base_url: "http://127.0.0.1:1"}
  - {name: mock-gemini, provider: gemini, base_url: "http://127.0.0.1:1"}
models:
  - {id: gpt-4o-mini, deployments: [{backend: mock, model: gpt-4o-mini}]}
  - {id: claude-sonnet, deployments: [{backend: mock-anthropic, model: claude-sonnet-4-20250514}]}
  - {id: imagen, deployments: [{backend: mock-gemini, model: imagen-4.0-generate-001}]}
`

// replicaSetup makes a PostgreSQL schema of the test's own (skipping
// without MODELGATE_TEST_POSTGRES_URL) and a config file of replicaConfig
// and extra on it: the schema's URL, the file's path and the environment
// replicas read.
func replicaSetup(t *testing.T, extra string) (db, cfgPath string, getenv func(string) string) {
	t.Helper()
	db = postgresSchema(t)
	getenv = func(name string) string {
		switch name {
		case "MODELGATE_REPLICA_DB":
			return db
		case "MODELGATE_REPLICA_IMAGE_KEY":
			return "an image URL key the replicas share, 32+ characters"
		}
		return ""
	}
	cfgPath = filepath.Join(t.TempDir(), "modelgate.yaml")
	if err := os.WriteFile(cfgPath, []byte(replicaConfig+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return db, cfgPath, getenv
}

// replica is one in-process gateway, as `modelgate dev` runs it: the
// ext_proc server behind the Envoy stand-in, with its own mock provider.
type replica struct {
	*devStack
	devAddrs
	cancel context.CancelFunc
	once   sync.Once
}

func startReplica(t *testing.T, cfgPath string, getenv func(string) string) *replica {
	t.Helper()
	r := &replica{}
	r.devStack = &devStack{log: newLogger(io.Discard), e: env{getenv: getenv, stdout: io.Discard, stderr: io.Discard,
		ready: func(a devAddrs) { r.devAddrs = a }}}
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(context.Background())
	t.Cleanup(r.stop)
	if err := r.start(ctx, cfgPath, "127.0.0.1:0", "127.0.0.1:0", t.TempDir()); err != nil {
		t.Fatalf("starting a replica: %v", err)
	}
	return r
}

// stop shuts the replica down as SIGTERM would, flushing its ledger.
func (r *replica) stop() {
	r.once.Do(func() {
		r.cancel()
		r.close()
	})
}

const replicaChat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}]}`

// Two gateways on one PostgreSQL share keys, the ledger and response
// state: a key made with `modelgate keys` works on both; a response or an
// image one keeps, the other serves; revoked through
// one's admin API (which drops that replica's cache at once), it is
// refused by the other within the principal cache TTL, the bound
// docs/behaviour.md states; the usage both recorded adds up in one ledger; and a
// response made on one is continued on the other.
func TestReplicasOnOnePostgreSQL(t *testing.T) {
	db, cfgPath, getenv := replicaSetup(t, "")
	a := startReplica(t, cfgPath, getenv)
	b := startReplica(t, cfgPath, getenv)

	var out, errOut strings.Builder
	err := run(context.Background(), []string{"keys", "create", "--config", cfgPath, "--account", "acme"},
		env{getenv: getenv, stdout: &out, stderr: &errOut})
	key := strings.TrimSpace(out.String())
	if err != nil || !strings.HasPrefix(key, authz.KeyPrefix) {
		t.Fatalf("keys create: %q %q %v", key, errOut.String(), err)
	}
	for _, r := range []*replica{a, b, a, b} { // each replica now has the key cached
		for range 2 {
			if status, body := r.call(t, "POST", "/chat/completions", key, replicaChat); status != 200 {
				t.Fatalf("chat through a replica: %d %s", status, body)
			}
		}
	}

	t.Run("a response made on one replica continues on the other", func(t *testing.T) {
		status, body := a.call(t, "POST", "/responses", key, `{"model":"claude-sonnet","input":"My name is Ada."}`)
		var first struct{ ID string }
		if status != 200 || json.Unmarshal(body, &first) != nil || first.ID == "" {
			t.Fatalf("first response: %d %s", status, body)
		}
		status, body = b.call(t, "POST", "/responses", key, fmt.Sprintf(`{"model":"claude-sonnet","input":"What did I say?","previous_response_id":%q}`, first.ID))
		if status != 200 {
			t.Errorf("continuing %s on the other replica: %d %s", first.ID, status, body)
		}
	})

	t.Run("an image kept by one replica is served by the other", func(t *testing.T) {
		status, body := a.call(t, "POST", "/images/generations", key, `{"model":"imagen","prompt":"A line drawing of a cat","response_format":"url"}`)
		var res struct{ Data []struct{ URL string } }
		if status != 200 || json.Unmarshal(body, &res) != nil || len(res.Data) != 1 {
			t.Fatalf("image generation: %d %s", status, body)
		}
		u := strings.Replace(res.Data[0].URL, strings.TrimSuffix(a.Gateway, "/v1"), strings.TrimSuffix(b.Gateway, "/v1"), 1)
		if u == res.Data[0].URL {
			t.Fatalf("the URL %s is not the first replica's", u)
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		img, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || http.DetectContentType(img) != "image/png" {
			t.Errorf("GET %s on the other replica: %d, %d bytes", u, resp.StatusCode, len(img))
		}
	})

	t.Run("a key revoked through one replica is refused by the other within the cache TTL", func(t *testing.T) {
		var id string
		if _, err := fmt.Sscanf(errOut.String(), "created key %s", &id); err != nil {
			t.Fatalf("no key id in %q", errOut.String())
		}
		if status, body := a.admin(t, "POST", "/admin/v1/keys/"+id+"/revoke", ""); status != 200 {
			t.Fatalf("revoking through the admin API: %d %s", status, body)
		}
		revoked := time.Now()
		if status, body := a.call(t, "GET", "/models", key, ""); status != 401 {
			t.Errorf("the revoking replica: %d %s, want 401 at once", status, body)
		}
		const bound = 10 * time.Second // authz.AuthenticatorConfig.TTL's default
		for {
			status, body := b.call(t, "GET", "/models", key, "")
			if status == 401 {
				t.Logf("the other replica refused the key %v after the revocation", time.Since(revoked).Round(time.Millisecond))
				break
			}
			if status != 200 {
				t.Fatalf("the other replica: %d %s", status, body)
			}
			if time.Since(revoked) > bound+time.Second {
				t.Fatalf("the other replica still accepts the key %v after the revocation", time.Since(revoked))
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("both replicas' usage is in the one ledger", func(t *testing.T) {
		a.stop() // flushing their ledgers
		b.stop()
		store, err := postgres.Open(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		acct, err := store.AccountByName(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		rows, err := store.UsageReport(context.Background(), ledger.UsageQuery{AccountID: acct.ID, By: ledger.ByModel})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, r := range rows {
			got[r.Model] = r.Requests
		}
		// Two chats per visit of each replica, two responses, an image.
		if want := map[string]int64{"gpt-4o-mini": 8, "claude-sonnet": 2, "imagen": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("requests by model = %v, want %v", got, want)
		}
	})
}
