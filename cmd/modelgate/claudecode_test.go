package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClaudeCode runs Claude Code (npm's @anthropic-ai/claude-code, in
// testdata/agents) non-interactively through `modelgate dev`'s Messages
// API with thinking on: a task that reads a file with its Bash tool, then
// a second turn of the same session (--continue) that runs a command, on
// the scripted model as Anthropic and as Claude on Bedrock (both passed
// through as sent, Bedrock's at InvokeModel) and as OpenAI's chat
// (bridged). Each provider was asked to
// think; Claude's signed thinking came back to it, or it would have
// refused the turn.
func TestClaudeCode(t *testing.T) {
	_, dir := nodePackage(t, "agents", "@anthropic-ai/claude-code")
	claude := filepath.Join(dir, "node_modules", ".bin", "claude")
	a := startDev(t, func(string) string { return "" })
	base := strings.TrimSuffix(a.Gateway, "/v1")
	for _, model := range []string{"agent-claude", "agent-gpt", "agent-bedrock"} {
		t.Run(model, func(t *testing.T) {
			home, work := t.TempDir(), t.TempDir()
			first := "mg-file-" + model
			if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte(first+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			run := func(marker string, args ...string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, claude, append(args, "--allowedTools", "Bash", "--output-format", "json")...)
				cmd.Dir = work
				cmd.Env = append(os.Environ(), "HOME="+home, "ANTHROPIC_BASE_URL="+base, "ANTHROPIC_API_KEY="+a.APIKey,
					"ANTHROPIC_MODEL="+model, "ANTHROPIC_SMALL_FAST_MODEL="+model, "MAX_THINKING_TOKENS=4000",
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1")
				cmd.Stdin = strings.NewReader("")
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
				var result struct {
					Result  string
					IsError bool `json:"is_error"`
				}
				if err := json.Unmarshal(lines[len(lines)-1], &result); err != nil || result.IsError || !strings.Contains(result.Result, marker) {
					t.Fatalf("claude %s answered %v %q, want %q in it\n%s", strings.Join(args, " "), err, result.Result, marker, out)
				}
			}
			task := "mg-task-" + model // marks the conversation's requests
			run(first, "-p", "Run `cat notes.txt` and tell me what it says ("+task+").")
			askedToThink(t, a, model, task)
			second := "mg-second-" + model
			run(second, "--continue", "-p", "Now run `echo "+second+"` please.")
			askedToThink(t, a, model, second)
			if reqs := providerRequests(t, a.Mock, second); !bytes.Contains(mustMarshal(t, reqs), []byte(task)) {
				t.Errorf("the continued session's requests do not carry its first turn")
			}
		})
	}
}

// askedToThink checks the provider was asked to think in the conversation
// marked by marker and, for Claude, got its signed thinking back. Claude
// on Bedrock gets the Messages API's body (InvokeModel), so it is checked
// as Anthropic is.
func askedToThink(t *testing.T, a devAddrs, model, marker string) {
	t.Helper()
	switch model {
	case "agent-claude", "agent-bedrock":
		thinkingBack(t, a.Mock, "agent-claude", marker)
		return
	}
	for _, r := range providerRequests(t, a.Mock, marker) {
		if effort, _ := r["reasoning_effort"].(string); effort != "" && effort != "none" {
			return
		}
	}
	t.Errorf("%s: no request of the conversation asked for reasoning", model)
}
