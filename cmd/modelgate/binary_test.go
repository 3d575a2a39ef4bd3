package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The README's first command, as a newcomer runs it: the built binary's
// `dev` serves, prints the base URL and a key once, and stops on SIGTERM.
func TestDevBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "modelgate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	listen := freeAddr(t)
	cmd := exec.CommandContext(ctx, bin, "dev", "--listen", listen, "--admin-listen", freeAddr(t), "--data-dir", t.TempDir())
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	key := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && key == "" {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "OPENAI_API_KEY="); ok {
			key = strings.Fields(v)[0]
		}
	}
	go io.Copy(io.Discard, stdout)
	req, _ := http.NewRequest("GET", "http://"+listen+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"gpt-4o-mini"`) {
		t.Errorf("GET /v1/models = %d %s", resp.StatusCode, body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("dev did not stop cleanly on SIGTERM: %v", err)
	}
}
