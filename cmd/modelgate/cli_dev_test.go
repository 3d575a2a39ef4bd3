package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/sqlite"
)

// runDevOnce starts `modelgate dev` on dataDir, returns its addresses and
// what it printed, and stops it.
func runDevOnce(t *testing.T, dataDir string, getenv func(string) string, check func(devAddrs)) (devAddrs, string) {
	t.Helper()
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan devAddrs, 1), make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir", dataDir},
			env{getenv: getenv, stdout: &out, stderr: &syncBuffer{}, ready: func(a devAddrs) { ready <- a }})
	}()
	var a devAddrs
	select {
	case a = <-ready:
	case err := <-done:
		t.Fatalf("dev failed to start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not start")
	}
	if check != nil {
		check(a)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("dev ended with %v", err)
	}
	return a, out.String()
}

// devKeys returns the dev account's keys in dataDir's store.
func devKeys(t *testing.T, dataDir string) []authz.Key {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(dataDir, "modelgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a, err := store.AccountByName(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := store.ListKeys(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// dev keeps its key in <data dir>/dev-key, readable by its owner only, and
// prints and reuses it on the next start while it authenticates; once it
// does not (revoked here), dev makes a new one and rewrites the file. A key
// from MODELGATE_DEV_API_KEY leaves the file alone.
func TestDevKeepsItsKey(t *testing.T) {
	dataDir := t.TempDir()
	keyFile := filepath.Join(dataDir, "dev-key")
	noEnv := func(string) string { return "" }
	works := func(a devAddrs) {
		if status, body := a.call(t, "GET", "/models", a.APIKey, ""); status != 200 {
			t.Errorf("GET /models with the dev key = %d %s", status, body)
		}
	}

	first, out := runDevOnce(t, dataDir, noEnv, works)
	if want := "  OPENAI_API_KEY=" + first.APIKey + "   (new; kept in " + keyFile + ")\n"; !strings.HasPrefix(first.APIKey, authz.KeyPrefix) || !strings.Contains(out, want) {
		t.Errorf("first start printed:\n%s\nwant the line %q", out, want)
	}
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", fi, err)
	}
	if b, _ := os.ReadFile(keyFile); string(b) != first.APIKey+"\n" {
		t.Errorf("key file holds %q, want the key", b)
	}

	second, out := runDevOnce(t, dataDir, noEnv, works)
	if want := "  OPENAI_API_KEY=" + first.APIKey + "   (kept in " + keyFile + ")\n"; second.APIKey != first.APIKey || !strings.Contains(out, want) {
		t.Errorf("second start: key %q, printed:\n%s\nwant the first key, the line %q", second.APIKey, out, want)
	}
	keys := devKeys(t, dataDir)
	if len(keys) != 1 || keys[0].Prefix != authz.VisiblePrefix(first.APIKey) {
		t.Fatalf("the store has keys %+v, want the one dev key", keys)
	}

	if _, _, err := runCmd(t, "keys", "revoke", "--config", writeSQLiteConfig(t, dataDir), keys[0].ID); err != nil {
		t.Fatal(err)
	}
	third, out := runDevOnce(t, dataDir, noEnv, works)
	if third.APIKey == first.APIKey || !strings.Contains(out, "OPENAI_API_KEY="+third.APIKey+"   (new; kept in ") {
		t.Errorf("after revoking: key %q, printed:\n%s\nwant a new key", third.APIKey, out)
	}
	if b, _ := os.ReadFile(keyFile); string(b) != third.APIKey+"\n" {
		t.Errorf("key file holds %q, want the new key", b)
	}
	if keys := devKeys(t, dataDir); len(keys) != 2 {
		t.Errorf("the store has %d keys, want the revoked one and the new one", len(keys))
	}

	fromEnv := "sk-mg-from-the-environment-0123456789"
	fourth, out := runDevOnce(t, dataDir, func(n string) string {
		if n == "MODELGATE_DEV_API_KEY" {
			return fromEnv
		}
		return ""
	}, works)
	if fourth.APIKey != fromEnv || !strings.Contains(out, "OPENAI_API_KEY=$MODELGATE_DEV_API_KEY\n") {
		t.Errorf("with MODELGATE_DEV_API_KEY: key %q, printed:\n%s", fourth.APIKey, out)
	}
	if b, _ := os.ReadFile(keyFile); string(b) != third.APIKey+"\n" {
		t.Errorf("key file holds %q, want it untouched", b)
	}
}

// A key file whose key this store does not know (another database, say)
// is replaced.
func TestDevReplacesAForeignKey(t *testing.T) {
	dataDir := t.TempDir()
	foreign, _ := authz.GenerateKey()
	if err := os.WriteFile(filepath.Join(dataDir, "dev-key"), []byte(foreign+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, _ := runDevOnce(t, dataDir, func(string) string { return "" }, nil)
	if a.APIKey == foreign {
		t.Errorf("dev reused a key its store does not know")
	}
	fi, err := os.Stat(filepath.Join(dataDir, "dev-key"))
	if b, _ := os.ReadFile(filepath.Join(dataDir, "dev-key")); err != nil || string(b) != a.APIKey+"\n" || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file holds %q (%v, %v), want the new key, mode 0600", b, fi, err)
	}
}

func writeSQLiteConfig(t *testing.T, dataDir string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("storage: {sqlite_path: "+filepath.Join(dataDir, "modelgate.db")+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
