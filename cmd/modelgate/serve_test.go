package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/extproc/config"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func serveConfig(t *testing.T, extra string) string {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	cfg := "server: {grpc_listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0}\nstorage: {sqlite_path: " + filepath.Join(dir, "s.db") + "}\n" + extra
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServe(t *testing.T) {
	path := serveConfig(t, "backends: [{name: oa, provider: openai, base_url: 'https://api.openai.com', api_key_env: TEST_OPENAI_KEY}]\n")
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", path}, env{getenv: func(n string) string {
			if n == "TEST_OPENAI_KEY" {
				return "sk-test"
			}
			return ""
		}, stdout: &logs, stderr: &logs})
	}()
	var line struct{ Admin string }
	for range 100 {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"msg":"serving"`) {
				json.Unmarshal([]byte(l), &line)
			}
		}
		if line.Admin != "" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get("http://" + line.Admin + "/healthz")
	if err != nil {
		t.Fatalf("healthz: %v (logs %s)", err, logs.String())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("healthz status %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve ended with %v", err)
	}
}

func TestServeNeedsCredentials(t *testing.T) {
	path := serveConfig(t, "backends: [{name: oa, provider: openai, base_url: 'https://api.openai.com', api_key_env: TEST_UNSET_KEY}]\n")
	_, _, err := runCmd(t, "serve", "--config", path)
	if err == nil || !strings.Contains(err.Error(), "TEST_UNSET_KEY is not set") {
		t.Errorf("serve error = %v, want the missing variable named", err)
	}
}

func TestBedrockCredentials(t *testing.T) {
	env := map[string]string{"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "S"}
	getenv := func(n string) string { return env[n] }
	c, err := credentials(config.Backend{Name: "br", Provider: "bedrock", BaseURL: "https://bedrock-runtime.eu-west-1.amazonaws.com"}, getenv)
	if err != nil || c.AWS.AccessKeyID != "AKID" || c.AWS.SecretAccessKey != "S" || c.APIKey != "" {
		t.Errorf("credentials = %+v, %v", c, err)
	}
	delete(env, "AWS_SECRET_ACCESS_KEY")
	if _, err := credentials(config.Backend{Name: "br", Provider: "bedrock", BaseURL: "https://x"}, getenv); err == nil || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("missing secret: error = %v", err)
	}
}

// A credential that cannot be a header value (a secret file mounted with
// its trailing newline) is refused at startup, naming the variable and
// never the value.
func TestCredentialsWithLineBreaksRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		b   config.Backend
		env map[string]string
		bad string
	}{
		"api key newline": {config.Backend{Name: "oa", Provider: "openai", BaseURL: "https://api.openai.com", APIKeyEnv: "K"},
			map[string]string{"K": "sk-XYZZY\n"}, "K"},
		"api key NUL": {config.Backend{Name: "oa", Provider: "openai", BaseURL: "https://api.openai.com", APIKeyEnv: "K"},
			map[string]string{"K": "sk-XY\x00ZZY"}, "K"},
		"aws secret CR": {config.Backend{Name: "br", Provider: "bedrock", BaseURL: "https://bedrock-runtime.eu-west-1.amazonaws.com"},
			map[string]string{"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "XYZZY\r"}, "AWS_SECRET_ACCESS_KEY"},
	} {
		_, err := credentials(tc.b, func(n string) string { return tc.env[n] })
		if err == nil || !strings.Contains(err.Error(), tc.bad) || strings.Contains(err.Error(), "XY") {
			t.Errorf("%s: error %v, want the variable %s named and no value", name, err, tc.bad)
		}
	}
}
