package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve's --grpc-listen, --admin-listen and --sqlite-path win over the
// config's server.grpc_listen, server.admin_listen and storage.sqlite_path.
func TestServeFlagsOverrideConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	// Addresses nothing can listen on: serve fails if it uses them.
	cfg := "server: {grpc_listen: '127.0.0.1:no', admin_listen: '127.0.0.1:none'}\nstorage: {sqlite_path: " + filepath.Join(dir, "config.db") + "}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcAddr, adminAddr, dbPath := freeAddr(t), freeAddr(t), filepath.Join(dir, "flag.db")
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", path, "--grpc-listen", grpcAddr, "--admin-listen", adminAddr, "--sqlite-path", dbPath},
			env{getenv: func(string) string { return "" }, stdout: &logs, stderr: &logs})
	}()
	var line struct{ GRPC, Admin string }
	for deadline := time.Now().Add(10 * time.Second); line.Admin == "" && time.Now().Before(deadline); {
		select {
		case err := <-done:
			t.Fatalf("serve ended with %v; logs:\n%s", err, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"msg":"serving"`) {
				json.Unmarshal([]byte(l), &line)
			}
		}
	}
	if line.GRPC != grpcAddr || line.Admin != adminAddr {
		t.Errorf("serving on grpc %q, admin %q; want %q and %q (logs %s)", line.GRPC, line.Admin, grpcAddr, adminAddr, logs.String())
	}
	resp, err := http.Get("http://" + adminAddr + "/healthz")
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve ended with %v", err)
	}
	if _, err := os.Stat(dbPath); err != nil {
		t.Errorf("the --sqlite-path database: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.db")); !os.IsNotExist(err) {
		t.Errorf("the config's sqlite_path was opened too: %v", err)
	}
}

// --sqlite-path is refused when the config stores in PostgreSQL, where it
// would be silently ignored.
func TestServeSQLitePathWithPostgres(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("storage: {postgres_url_env: TEST_PG_URL}\n"), 0o644)
	_, _, err := runCmd(t, "serve", "--config", path, "--sqlite-path", "x.db")
	if err == nil || !strings.Contains(err.Error(), "--sqlite-path") || !strings.Contains(err.Error(), "postgres_url_env") {
		t.Errorf("serve error = %v, want --sqlite-path refused", err)
	}
}
