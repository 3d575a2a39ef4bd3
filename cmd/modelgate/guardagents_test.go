package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// guardAgentsConfig serves each scripted model under three ids: agent-*
// with monitor rules that match the clients' markers, masked-* with a
// rule that masks a secret in the user's text, and plain-* (as long as
// agent-*) with no rule.
const guardAgentsConfig = `backends:
  - {name: mock, provider: openai, base_url: "http://unused", api_key_env: UNUSED}
  - {name: mock-anthropic, provider: anthropic, base_url: "http://unused", api_key_env: UNUSED}
models:
  - {id: agent-claude, deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}]}
  - {id: plain-claude, deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}]}
  - {id: masked-claude, deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}]}
  - {id: agent-gpt, deployments: [{backend: mock, model: mock-agent}]}
  - {id: plain-gpt, deployments: [{backend: mock, model: mock-agent}]}
  - {id: masked-gpt, deployments: [{backend: mock, model: mock-agent}]}
guardrails:
  rules:
    - {name: watch-markers, phase: request, regex: {patterns: ["mg-[a-z]+"]}, action: monitor, parts: [user, system, assistant, tool_result], models: [agent-claude, agent-gpt]}
    - {name: watch-answers, phase: response, regex: {patterns: ["mg-[a-z]+"]}, action: monitor, parts: [answer, reasoning, arguments], models: [agent-claude, agent-gpt]}
    - {name: mask-secret, phase: request, regex: {patterns: ["mg-secret-[0-9]+"]}, action: mask, models: [masked-claude, masked-gpt]}
`

// agentLog is a proxy in front of the gateway that lets one request
// through at a time and keeps each, with the provider requests the mock
// got while it ran.
type agentLog struct {
	mu    sync.Mutex
	seen  []proxied
	proxy *httptest.Server
}

type proxied struct {
	path     string
	header   http.Header
	body     []byte
	upstream [][]byte // the bodies the provider got for it
}

func newExchangeLog(t *testing.T, a devAddrs) *agentLog {
	target, _ := url.Parse(strings.TrimSuffix(a.Gateway, "/v1"))
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	l := &agentLog{}
	l.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		defer l.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
		p := proxied{path: r.URL.Path, header: r.Header.Clone(), body: body, upstream: providerGot(a, w.Header().Get("x-request-id"))}
		l.seen = append(l.seen, p)
	}))
	t.Cleanup(l.proxy.Close)
	return l
}

// replayed checks that each request the log kept for model, sent again
// for plain (an id of the same length on the same deployment, without
// rules), gets the provider the very bytes it got.
func (l *agentLog) replayed(t *testing.T, a devAddrs, model, plain string) {
	t.Helper()
	l.mu.Lock()
	seen := l.seen
	l.mu.Unlock()
	from, to := []byte(`"model":"`+model+`"`), []byte(`"model":"`+plain+`"`)
	n := 0
	for _, p := range seen {
		if !bytes.Contains(p.body, from) || len(p.upstream) != 1 {
			continue
		}
		req, _ := http.NewRequest("POST", strings.TrimSuffix(a.Gateway, "/v1")+p.path, bytes.NewReader(bytes.Replace(p.body, from, to, 1)))
		req.Header = p.header.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		after := providerGot(a, res.Header.Get("x-request-id"))
		if len(after) != 1 || !bytes.Equal(after[0], p.upstream[0]) {
			t.Errorf("%s %s: the provider got, under monitor rules:\n%s\nwithout rules:\n%q", model, p.path, p.upstream[0], after)
		}
		n++
	}
	if n < 2 {
		t.Errorf("%s: %d requests compared, want the tool loop's", model, n)
	}
}

// masked checks that no provider request of the log's for model holds
// secret, and that every one that held it holds the same mask instead.
func (l *agentLog) masked(t *testing.T, model, secret string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	masks := map[string]bool{}
	for _, p := range l.seen {
		if !bytes.Contains(p.body, []byte(`"model":"`+model+`"`)) {
			continue
		}
		for _, up := range p.upstream {
			if bytes.Contains(up, []byte(secret)) {
				t.Errorf("%s: the provider got the secret: %s", model, up)
			}
			if bytes.Contains(p.body, []byte(secret)) {
				for _, m := range maskRE.FindAll(up, -1) {
					masks[string(m)] = true
				}
			}
		}
	}
	if len(masks) != 1 {
		t.Errorf("%s: masks %v, want the one mask of the one secret in every turn", model, masks)
	}
}

var maskRE = regexp.MustCompile(`\[masked:[0-9a-f]{8}\]`)

// Claude Code and Codex complete their tool loops with guardrails on
// their models: monitor rules that match their markers (and change no
// byte the provider gets: each request, sent again for a model without
// rules, reaches the provider as the same bytes), and a rule that masks a
// secret in the user's text (which never reaches the provider, masked the
// same way in every turn).
func TestAgentsUnderGuardrails(t *testing.T) {
	_, dir := nodePackage(t, "agents", "@anthropic-ai/claude-code")
	path := filepath.Join(t.TempDir(), "guard.yaml")
	if err := os.WriteFile(path, []byte(guardAgentsConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startDev(t, func(string) string { return "" }, "--config", path)
	log := newExchangeLog(t, a)
	const secret = "mg-secret-424242"

	t.Run("Claude Code", func(t *testing.T) {
		claude := filepath.Join(dir, "node_modules", ".bin", "claude")
		for _, model := range []string{"agent-claude", "masked-claude"} {
			home, work := t.TempDir(), t.TempDir()
			os.WriteFile(filepath.Join(work, "notes.txt"), []byte("mg-file-"+model+"\n"), 0o600)
			run := func(marker, prompt string, extra ...string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				args := append(extra, "-p", prompt, "--allowedTools", "Bash", "--output-format", "json")
				cmd := exec.CommandContext(ctx, claude, args...)
				cmd.Dir = work
				cmd.Env = append(os.Environ(), "HOME="+home, "ANTHROPIC_BASE_URL="+log.proxy.URL, "ANTHROPIC_API_KEY="+a.APIKey,
					"ANTHROPIC_MODEL="+model, "ANTHROPIC_SMALL_FAST_MODEL="+model,
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1")
				cmd.Stdin = strings.NewReader("")
				out, err := cmd.Output()
				lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
				var result struct {
					Result  string
					IsError bool `json:"is_error"`
				}
				if err != nil || json.Unmarshal(lines[len(lines)-1], &result) != nil || result.IsError || !strings.Contains(result.Result, marker) {
					t.Fatalf("claude %s: %v %q, want %q in it\n%s", model, err, result.Result, marker, out)
				}
			}
			run("mg-file-"+model, "Run `cat notes.txt` and tell me what it says. My code is "+secret+".")
			run("mg-again", "Now run `echo mg-again` please.", "--continue")
		}
		log.replayed(t, a, "agent-claude", "plain-claude")
		log.masked(t, "masked-claude", secret)
	})

	t.Run("Codex", func(t *testing.T) {
		codex := filepath.Join(dir, "node_modules", ".bin", "codex")
		for _, model := range []string{"agent-gpt", "masked-gpt"} {
			home, work := t.TempDir(), t.TempDir()
			run := func(marker string, args ...string) {
				t.Helper()
				last := filepath.Join(home, "last-message.txt")
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				argv := append([]string{"exec",
					"-c", `model_providers.modelgate={name="modelgate",base_url="` + log.proxy.URL + `/v1",env_key="MODELGATE_API_KEY",wire_api="responses"}`,
					"-c", "model_provider=modelgate", "-m", model, "--skip-git-repo-check", "-o", last}, args...)
				cmd := exec.CommandContext(ctx, codex, argv...)
				cmd.Dir = work
				cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "MODELGATE_API_KEY="+a.APIKey)
				cmd.Stdin = strings.NewReader("")
				out, err := cmd.CombinedOutput()
				answer, _ := os.ReadFile(last)
				if err != nil || !strings.Contains(string(answer), marker) {
					t.Fatalf("codex %s: %v, answered %q, want %q in it\n%s", model, err, answer, marker, out)
				}
			}
			first := "mg-first-" + strings.TrimSuffix(model, "-gpt")
			run(first, "Run `echo "+first+"` and tell me what it printed. My code is "+secret+".")
			run("mg-again", "resume", "--last", "Now run `echo mg-again`.")
		}
		log.replayed(t, a, "agent-gpt", "plain-gpt")
		log.masked(t, "masked-gpt", secret)
	})

	// The monitor rules matched, and the ledger says so.
	_, body := a.admin(t, "GET", "/admin/v1/requests?guard=monitored&limit=100", "")
	var page struct{ Data []struct{ Model string } }
	json.Unmarshal(body, &page) //nolint:errcheck // an empty page fails below
	models := map[string]bool{}
	for _, r := range page.Data {
		models[r.Model] = true
	}
	if !models["agent-claude"] || !models["agent-gpt"] || models["plain-claude"] {
		t.Errorf("monitored requests' models: %v", models)
	}
}
