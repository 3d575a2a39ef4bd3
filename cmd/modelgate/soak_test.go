package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	soakRate     = flag.Int("capture.soak.rate", 0, "TestCaptureSoak: requests a second (0 skips the test)")
	soakDuration = flag.Duration("capture.soak.duration", time.Minute, "TestCaptureSoak: how long requests are sent")
)

// A gateway on PostgreSQL that captures every request to the store, sent
// requests of a few kilobytes at -capture.soak.rate for
// -capture.soak.duration, keeps a capture of each: no capture is dropped
// while the store is healthy. Bounded in time and count, on 127.0.0.1
// only; it skips unless -capture.soak.rate is set (the soak lost a
// quarter of its captures at 39 requests a second, one INSERT each).
//
//	MODELGATE_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test ./cmd/modelgate -run TestCaptureSoak -capture.soak.rate 40 -capture.soak.duration 3m -v
func TestCaptureSoak(t *testing.T) {
	if *soakRate <= 0 {
		t.Skip("a soak: set -capture.soak.rate (and -capture.soak.duration) to run it")
	}
	db, cfgPath, getenv := replicaSetup(t, "observability: {capture: {to: store}}\n")
	r := startReplica(t, cfgPath, getenv)
	var out strings.Builder
	if err := run(context.Background(), []string{"keys", "create", "--config", cfgPath, "--account", "soak"},
		env{getenv: getenv, stdout: &out, stderr: &strings.Builder{}}); err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(out.String())
	// A few kilobytes of prompt, as an agent's turn carries.
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("Summarize the ledger. ", 200) + `"}]}`
	var sent, ok atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(*soakRate))
	defer tick.Stop()
	start := time.Now()
	for deadline := start.Add(*soakDuration); time.Now().Before(deadline); {
		<-tick.C
		sent.Add(1)
		wg.Go(func() {
			req, _ := http.NewRequest("POST", r.Gateway+"/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	r.stop() // flushes the ledger and the captures
	c, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var usage, captures int64
	if err := c.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM usage WHERE attempt = 0), (SELECT count(*) FROM captures)`).Scan(&usage, &captures); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests in %v (%.1f a second), %d answered 200; %d usage records, %d captures",
		sent.Load(), took.Round(time.Millisecond), float64(sent.Load())/took.Seconds(), ok.Load(), usage, captures)
	if usage != sent.Load() || captures != sent.Load() {
		t.Errorf("%d requests, %d usage records, %d captures: want one of each a request", sent.Load(), usage, captures)
	}
	fmt.Fprintln(os.Stderr) // the replica's access log ends without a newline
}
