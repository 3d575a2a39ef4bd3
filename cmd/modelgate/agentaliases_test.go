package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modelgate/cmd/mockprovider/replay"
)

// agentAliasesConfig is the config docs/agents.md shows: one model whose
// aliases take every id Claude Code and Codex send by default, on a
// deployment of its own; capabilities may drop what it lacks.
const agentAliasesConfig = `models:
  - id: house
    aliases: ["claude-*", "gpt-*", "codex-*"]
    %s
    deployments: [{backend: %s, model: %q}]
`

// Claude Code and Codex run their tool loops with their default model
// ids, which no model has, through aliases only: on an Anthropic-format
// model (Claude's signed thinking comes back to it: every answer names
// the model the agent asked for), an OpenAI-format one, and Bedrock's
// Nova, which lacks reasoning and is set to serve the agents' reasoning
// requests without it.
func TestAgentsThroughAliases(t *testing.T) {
	_, dir := nodePackage(t, "agents", "@anthropic-ai/claude-code")
	claude := filepath.Join(dir, "node_modules", ".bin", "claude")
	codex := filepath.Join(dir, "node_modules", ".bin", "codex")
	for _, target := range []struct{ name, backend, model, capabilities string }{
		{"anthropic", "mock-anthropic", "claude-sonnet-4-5-mock-agent", ""},
		{"openai", "mock", "mock-agent", ""},
		{"nova", "mock-bedrock", "us.amazon.nova-pro-mock-agent-v1:0", "capabilities: {drop: [reasoning]}"},
	} {
		t.Run(target.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agents.yaml")
			if err := os.WriteFile(path, []byte(fmt.Sprintf(agentAliasesConfig, target.capabilities, target.backend, target.model)), 0o600); err != nil {
				t.Fatal(err)
			}
			a := startDev(t, func(string) string { return "" }, "--config", path)
			base := strings.TrimSuffix(a.Gateway, "/v1")

			home, work := t.TempDir(), t.TempDir()
			first := "mg-file-" + target.name
			if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte(first+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			task := "mg-cc-" + target.name
			out := runAgent(t, work, claude, []string{"HOME=" + home, "ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_API_KEY=" + a.APIKey,
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1"},
				"-p", "Run `cat notes.txt` and tell me what it says ("+task+").", "--allowedTools", "Bash", "--output-format", "json")
			lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
			var result struct {
				Result  string
				IsError bool `json:"is_error"`
			}
			if err := json.Unmarshal(lines[len(lines)-1], &result); err != nil || result.IsError || !strings.Contains(result.Result, first) {
				t.Fatalf("claude answered %v %q, want %q in it\n%s", err, result.Result, first, out)
			}
			if target.name == "anthropic" {
				thinkingBack(t, a.Mock, "agent-claude", task)
				// A new process keeps Claude's signed thinking of an
				// earlier answer only if that answer named the model it
				// asked for.
				second := "mg-cc-second"
				out := runAgent(t, work, claude, []string{"HOME=" + home, "ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_API_KEY=" + a.APIKey,
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1"},
					"--continue", "-p", "Now run `echo "+second+"` please.", "--allowedTools", "Bash", "--output-format", "json")
				if !bytes.Contains(out, []byte(second)) {
					t.Fatalf("claude --continue: %s", out)
				}
				thinkingBack(t, a.Mock, "agent-claude", second)
				signedBack(t, a.Mock, task, second)
			}
			if target.name == "nova" {
				for _, r := range providerRequests(t, a.Mock, task) {
					if r["additionalModelRequestFields"] != nil {
						t.Errorf("Nova was asked to reason: %v", r["additionalModelRequestFields"])
					}
				}
			}

			codexHome := t.TempDir()
			echo := "mg-codex-" + target.name
			last := filepath.Join(codexHome, "last-message.txt")
			out = runAgent(t, work, codex, []string{"CODEX_HOME=" + codexHome, "MODELGATE_API_KEY=" + a.APIKey}, "exec",
				"-c", `model_providers.modelgate={name="modelgate",base_url="`+a.Gateway+`",env_key="MODELGATE_API_KEY",wire_api="responses"}`,
				"-c", "model_provider=modelgate", "--skip-git-repo-check", "-o", last, "Run `echo "+echo+"` and tell me what it printed.")
			if answer, err := os.ReadFile(last); err != nil || !strings.Contains(string(answer), echo) {
				t.Fatalf("codex answered %q (%v), want %q in it\n%s", answer, err, echo, out)
			}

			// The ledger has the agents' own names, resolved to house only
			// (it writes after the answers: wait for both agents' names).
			var asked map[string]string
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				asked = map[string]string{}
				for _, r := range requestRows(t, a) {
					asked[r.RequestedModel] = r.Model
				}
				if hasPrefixed(asked, "claude-") && (hasPrefixed(asked, "gpt-") || hasPrefixed(asked, "codex-")) {
					break
				}
			}
			if !hasPrefixed(asked, "claude-") || !hasPrefixed(asked, "gpt-") && !hasPrefixed(asked, "codex-") {
				t.Errorf("the names the agents sent: %v, want Claude Code's and Codex's defaults", asked)
			}
			for name, model := range asked {
				if model != "house" {
					t.Errorf("%q was recorded as %q", name, model)
				}
			}
			t.Logf("the agents asked for %v", asked)
		})
	}
}

// runAgent runs an agent's command line in work with env added, bounded
// in time, and returns its output.
func runAgent(t *testing.T, work, bin string, env []string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = work, append(os.Environ(), env...), strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return out
}

// requestRows are the ledger's records of the gateway's requests so far.
func requestRows(t *testing.T, a devAddrs) []requestRow {
	t.Helper()
	_, body := a.admin(t, "GET", "/admin/v1/requests?limit=500", "")
	var page struct{ Data []requestRow }
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("requests: %v %s", err, body)
	}
	return page.Data
}

func hasPrefixed(names map[string]string, prefix string) bool {
	for name := range names {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// signedBack checks that the continued conversation (marked by second)
// sent the provider the signed thinking of the first turn (marked by
// first) again: a thinking block in an assistant turn before second.
func signedBack(t *testing.T, mock *replay.Server, first, second string) {
	t.Helper()
	for _, r := range providerRequests(t, mock, second) {
		msgs, _ := r["messages"].([]any)
		for _, m := range msgs {
			m, _ := m.(map[string]any)
			if m["role"] != "assistant" {
				continue
			}
			blocks, _ := m["content"].([]any)
			for _, b := range blocks {
				if b, _ := b.(map[string]any); b["type"] == "thinking" && b["signature"] != nil && strings.Contains(fmt.Sprint(msgs), first) {
					return
				}
			}
		}
	}
	t.Errorf("the continued session sent back no signed thinking of its first turn")
}
