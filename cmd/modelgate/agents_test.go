package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"modelgate/cmd/mockprovider/replay"
	"modelgate/translate/api/spec"
)

// Real agent clients (testdata/agents: Codex CLI, the OpenAI Agents SDK,
// the Vercel AI SDK) run their loops through `modelgate dev` against the
// scripted model (cmd/mockprovider/scripted) in each provider's format.
// The scripted model refuses a turn whose thinking did not come back as
// the provider requires, so a loop that completes with thinking on shows
// the thinking was restored; each test also checks the provider was asked
// to think and got the thinking back.

// agentModels are dev's scripted models: one per provider format.
var agentModels = []string{"agent-gpt", "agent-claude", "agent-gemini", "agent-bedrock"}

// agentClients finds node and the clients installed in testdata/agents.
func agentClients(t *testing.T) (node, dir string) { return nodePackage(t, "agents", "@openai/codex") }

// providerRequests are the requests the mock received whose body holds
// marker, parsed.
func providerRequests(t *testing.T, mock *replay.Server, marker string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range mock.Requests() {
		if !bytes.Contains(r.Body, []byte(marker)) {
			continue
		}
		if r.Truncated {
			t.Fatalf("the mock kept only %d of %d bytes of %s", len(r.Body), r.Size, r.Path)
		}
		var body map[string]any
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("%s: %v", r.Path, err)
		}
		body["_path"] = r.Path
		out = append(out, body)
	}
	return out
}

// thinkingBack checks that the provider was asked to think and got its
// thinking back on a later turn of the conversation marked by marker: a
// signed thinking block first in an assistant turn (Anthropic, Claude on
// Bedrock), a thought signature on a function call (Gemini), the model's
// encrypted reasoning or a reference to it (OpenAI Responses).
func thinkingBack(t *testing.T, mock *replay.Server, model, marker string) {
	t.Helper()
	reqs := providerRequests(t, mock, marker)
	if len(reqs) < 2 {
		t.Fatalf("%s: the provider got %d requests of the conversation, want at least 2", model, len(reqs))
	}
	asked, back := false, false
	for _, r := range reqs {
		switch model {
		case "agent-claude":
			// Enabled with a budget, or adaptive (Claude Code's).
			typ := field(r["thinking"], "type")
			asked = asked || typ == "enabled" || typ == "adaptive"
			for _, m := range list(r["messages"]) {
				if c := list(field(m, "content")); field(m, "role") == "assistant" && len(c) > 0 && field(c[0], "type") == "thinking" && field(c[0], "signature") != "" {
					back = true
				}
			}
		case "agent-bedrock":
			asked = asked || field(field(r["additionalModelRequestFields"], "thinking"), "type") == "enabled"
			for _, m := range list(r["messages"]) {
				if c := list(field(m, "content")); field(m, "role") == "assistant" && len(c) > 0 && field(field(field(c[0], "reasoningContent"), "reasoningText"), "signature") != "" {
					back = true
				}
			}
		case "agent-gemini":
			asked = asked || field(field(r["generationConfig"], "thinkingConfig"), "includeThoughts") == true
			for _, c := range list(r["contents"]) {
				for _, p := range list(field(c, "parts")) {
					back = back || field(p, "functionCall") != nil && field(p, "thoughtSignature") != ""
				}
			}
		case "agent-gpt":
			asked = asked || field(r["reasoning"], "effort") != nil && field(r["reasoning"], "effort") != "none" || r["reasoning_effort"] != nil
			for _, it := range list(r["input"]) {
				// The reasoning, or (storing responses) its id or a
				// reference to it, which the model resolves.
				enc, _ := field(it, "encrypted_content").(string)
				id, _ := field(it, "id").(string)
				back = back || field(it, "type") == "reasoning" && (strings.HasPrefix(enc, "scripted:") || strings.HasPrefix(id, "rs_scripted")) ||
					field(it, "type") == "item_reference" && strings.HasPrefix(id, "rs_scripted")
			}
		}
	}
	if !asked || !back {
		t.Errorf("%s: thinking asked of the provider %v, given back %v", model, asked, back)
	}
}

func list(v any) []any { l, _ := v.([]any); return l }

func field(v any, name string) any {
	m, _ := v.(map[string]any)
	return m[name]
}

// TestCodex runs Codex CLI with its default tools and reasoning effort
// medium: a task that runs a shell command and answers with its output,
// then `codex exec resume --last` with a second one, then a task whose
// answer must match a JSON schema (--output-schema, with reasoning still
// on), on each provider.
func TestCodex(t *testing.T) {
	_, dir := agentClients(t)
	codex := filepath.Join(dir, "node_modules", ".bin", "codex")
	a := startDev(t, func(string) string { return "" })
	for _, model := range agentModels {
		t.Run(model, func(t *testing.T) {
			home, work := t.TempDir(), t.TempDir()
			run := func(marker string, args ...string) string {
				t.Helper()
				last := filepath.Join(home, "last-message.txt")
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				argv := append([]string{"exec",
					"-c", `model_providers.modelgate={name="modelgate",base_url="` + a.Gateway + `",env_key="MODELGATE_API_KEY",wire_api="responses"}`,
					"-c", "model_provider=modelgate", "-m", model, "-c", "model_reasoning_effort=medium",
					"--skip-git-repo-check", "-o", last}, args...)
				cmd := exec.CommandContext(ctx, codex, argv...)
				cmd.Dir = work
				cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "MODELGATE_API_KEY="+a.APIKey)
				cmd.Stdin = strings.NewReader("")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("codex %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				answer, err := os.ReadFile(last)
				if err != nil {
					t.Fatalf("codex wrote no last message: %v\n%s", err, out)
				}
				if !strings.Contains(string(answer), marker) {
					t.Fatalf("codex answered %q, want the command's output %q in it\n%s", answer, marker, out)
				}
				return string(answer)
			}
			first := "mg-first-" + model
			run(first, "Run `echo "+first+"` and tell me what it printed.")
			thinkingBack(t, a.Mock, model, first)
			second := "mg-second-" + model
			run(second, "resume", "--last", "Now run `echo "+second+"`.")
			thinkingBack(t, a.Mock, model, second)
			// The resumed conversation reached the provider whole.
			if reqs := providerRequests(t, a.Mock, second); !bytes.Contains(mustMarshal(t, reqs), []byte(first)) {
				t.Errorf("the resumed turn's requests do not carry the first turn")
			}

			schema := filepath.Join(home, "schema.json")
			os.WriteFile(schema, []byte(`{"type":"object","properties":{"output":{"type":"string"}},"required":["output"],"additionalProperties":false}`), 0o600)
			third := "mg-schema-" + model
			var answer struct{ Output string }
			if got := run(third, "--output-schema", schema, "Run `echo "+third+"` and report its output."); json.Unmarshal([]byte(got), &answer) != nil || !strings.Contains(answer.Output, third) {
				t.Errorf("with --output-schema codex answered %q, want {\"output\": …%s…}", got, third)
			}
			thinkingBack(t, a.Mock, model, third)
		})
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// clientRun is a line a client script prints: a run, the tool calls it
// made and its final output.
type clientRun struct {
	Run    string          `json:"run"`
	Calls  []string        `json:"calls"`
	Output json.RawMessage `json:"output"`
}

// runClient runs a client script with args and returns its runs by name.
func runClient(t *testing.T, node, dir string, a devAddrs, script string, args ...string) map[string]clientRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MODELGATE_BASE_URL="+a.Gateway, "MODELGATE_API_KEY="+a.APIKey, "AI_SDK_LOG_WARNINGS=false")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s %v: %v\n%s%s", script, args, err, out, stderr.Bytes())
	}
	runs := map[string]clientRun{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r clientRun
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Run != "" {
			runs[r.Run] = r
		}
	}
	return runs
}

// checkRuns checks a script's two runs: the tool loop called the tool
// once and answered with its result; the structured run called it and
// answered the JSON object the schema asks for, holding the result.
func checkRuns(t *testing.T, runs map[string]clientRun, loopName, structuredName string) {
	t.Helper()
	loop := runs["loop"]
	var text string
	if json.Unmarshal(loop.Output, &text) != nil || len(loop.Calls) != 1 || loop.Calls[0] != loopName || !strings.Contains(text, "secret-of-"+loopName) {
		t.Errorf("tool loop: calls %v, output %s; want one call for %s and its result in the answer", loop.Calls, loop.Output, loopName)
	}
	structured := runs["structured"]
	var obj struct{ Secret string }
	if json.Unmarshal(structured.Output, &obj) != nil || len(structured.Calls) != 1 || !strings.Contains(obj.Secret, "secret-of-"+structuredName) {
		t.Errorf("structured output: calls %v, output %s; want one call and {\"secret\": …secret-of-%s…}", structured.Calls, structured.Output, structuredName)
	}
}

// TestAgentsSDK runs the OpenAI Agents SDK (Responses API): a two-step
// tool loop with reasoning on, and a structured output with tools, on
// each provider.
func TestAgentsSDK(t *testing.T) {
	node, dir := agentClients(t)
	a := startDev(t, func(string) string { return "" })
	for _, model := range agentModels {
		t.Run(model, func(t *testing.T) {
			loop, structured := "alpha-"+model, "beta-"+model
			checkRuns(t, runClient(t, node, dir, a, "agents.mjs", model, loop, structured), loop, structured)
			thinkingBack(t, a.Mock, model, loop)
		})
	}
}

// TestAISDK runs the Vercel AI SDK the same way, through the Responses
// API storing responses (its default: it sends earlier items back as
// references), through it statelessly (store: false, reasoning as
// encrypted content), and through chat completions.
func TestAISDK(t *testing.T) {
	node, dir := agentClients(t)
	a := startDev(t, func(string) string { return "" })
	for _, model := range agentModels {
		for _, api := range []string{"responses-store", "responses-stateless", "chat"} {
			t.Run(model+"/"+api, func(t *testing.T) {
				loop, structured := "alpha-"+api+"-"+model, "beta-"+api+"-"+model
				checkRuns(t, runClient(t, node, dir, a, "aisdk.mjs", model, api, loop, structured), loop, structured)
				if api != "chat" || model == "agent-gemini" {
					// On chat completions the AI SDK does not send Claude's
					// thinking back (it knows no field for it); the gateway
					// then turns thinking off for the turn rather than
					// send one Claude refuses.
					thinkingBack(t, a.Mock, model, loop)
				}
			})
		}
	}
}

// TestChatThinkingThreeTurns runs a chat completions tool loop with
// reasoning_effort over three user turns on Claude, Claude on Bedrock and
// Gemini, JSON and streamed, as a client that sends each assistant
// message back as it got it: the provider must get its thinking back on
// every turn (the scripted model refuses a turn without it, as the
// providers document) and thinking must stay on.
func TestChatThinkingThreeTurns(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	const tools = `"tools":[{"type":"function","function":{"name":"get_secret","description":"Look up a secret.","parameters":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}]`
	for _, model := range []string{"agent-claude", "agent-bedrock", "agent-gemini"} {
		for _, stream := range []bool{false, true} {
			name := model + "/json"
			if stream {
				name = model + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				var messages []json.RawMessage
				complete := func() map[string]any {
					t.Helper()
					b, _ := json.Marshal(map[string]any{"model": model, "reasoning_effort": "low", "stream": stream, "messages": messages})
					body := string(b[:len(b)-1]) + "," + tools + "}"
					status, out := a.call(t, "POST", "/chat/completions", a.APIKey, body)
					if status != 200 {
						t.Fatalf("turn %d: %d %s", len(messages), status, out)
					}
					msg := chatMessage(t, out, stream)
					raw, _ := json.Marshal(msg)
					messages = append(messages, raw)
					return msg
				}
				for turn := 1; turn <= 3; turn++ {
					marker := "turn-" + strconv.Itoa(turn) + "-" + name
					messages = append(messages, json.RawMessage(`{"role":"user","content":"What is the secret under `+"`"+marker+"`"+`?"}`))
					call := complete()
					calls := list(call["tool_calls"])
					if len(calls) != 1 || len(list(call["thinking_blocks"])) == 0 && model != "agent-gemini" {
						t.Fatalf("turn %d: %v; want one tool call and, from Claude, its thinking", turn, call)
					}
					id, _ := field(calls[0], "id").(string)
					out, _ := json.Marshal(map[string]any{"role": "tool", "tool_call_id": id, "content": "secret-of-" + marker})
					messages = append(messages, out)
					answer := complete()
					if text, _ := answer["content"].(string); !strings.Contains(text, "secret-of-"+marker) {
						t.Fatalf("turn %d answered %v", turn, answer)
					}
					thinkingBack(t, a.Mock, model, marker)
				}
			})
		}
	}
}

// chatMessage is a chat completion's assistant message, gathered from
// the chunks of a stream: content, tool calls and thinking blocks.
func chatMessage(t *testing.T, body []byte, stream bool) map[string]any {
	t.Helper()
	if !stream {
		var cc struct {
			Choices []struct{ Message map[string]any }
		}
		if json.Unmarshal(body, &cc) != nil || len(cc.Choices) != 1 {
			t.Fatalf("not a completion: %s", body)
		}
		return cc.Choices[0].Message
	}
	msg := map[string]any{"role": "assistant"}
	var content strings.Builder
	var calls []map[string]any
	var thinking []any
	for _, data := range sseData(body) {
		if data == "[DONE]" {
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content        string `json:"content"`
					ThinkingBlocks []any  `json:"thinking_blocks"`
					ToolCalls      []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, c := range chunk.Choices {
			content.WriteString(c.Delta.Content)
			thinking = append(thinking, c.Delta.ThinkingBlocks...)
			for _, tc := range c.Delta.ToolCalls {
				for len(calls) <= tc.Index {
					calls = append(calls, map[string]any{"type": "function", "function": map[string]any{"name": "", "arguments": ""}})
				}
				call, fn := calls[tc.Index], calls[tc.Index]["function"].(map[string]any)
				if tc.ID != "" {
					call["id"] = tc.ID
				}
				fn["name"] = fn["name"].(string) + tc.Function.Name
				fn["arguments"] = fn["arguments"].(string) + tc.Function.Arguments
			}
		}
	}
	if content.Len() > 0 {
		msg["content"] = content.String()
	}
	if len(calls) > 0 {
		l := make([]any, len(calls))
		for i, c := range calls {
			l[i] = c
		}
		msg["tool_calls"] = l
	}
	if len(thinking) > 0 {
		msg["thinking_blocks"] = thinking
	}
	return msg
}

// A stored response's items are sent back as item_references, without
// previous_response_id (the AI SDK does so by default): the gateway
// finds them in the account's stored responses, Claude's signed thinking
// included; another account's items are not found.
func TestResponsesItemReferencesToStoredItems(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	const tools = `"tools":[{"type":"function","name":"get_secret","parameters":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}]`
	user := `{"role":"user","content":"What is the secret under ` + "`gamma`" + `?"}`
	status, out := a.call(t, "POST", "/responses", a.APIKey, `{"model":"agent-claude","reasoning":{"effort":"low"},`+tools+`,"input":[`+user+`]}`)
	if status != 200 {
		t.Fatalf("%d %s", status, out)
	}
	var first struct {
		Output []struct {
			Type, ID string
			CallID   string `json:"call_id"`
		} `json:"output"`
	}
	json.Unmarshal(out, &first)
	var refs []string
	callID := ""
	for _, it := range first.Output {
		refs = append(refs, `{"type":"item_reference","id":"`+it.ID+`"}`)
		if it.Type == "function_call" {
			callID = it.CallID
		}
	}
	if len(refs) != 2 || callID == "" {
		t.Fatalf("first answer %s: want a reasoning item and a function call", out)
	}
	next := `{"model":"agent-claude","reasoning":{"effort":"low"},` + tools + `,"input":[` + user + `,` + strings.Join(refs, ",") +
		`,{"type":"function_call_output","call_id":"` + callID + `","output":"secret-of-gamma"}]}`
	status, out = a.call(t, "POST", "/responses", a.APIKey, next)
	if status != 200 || !strings.Contains(string(out), "The tool said: secret-of-gamma") {
		t.Fatalf("continued by references: %d %s", status, out)
	}
	thinkingBack(t, a.Mock, "agent-claude", "gamma")

	other := otherAccountKey(t, a, "other-account")
	status, out = a.call(t, "POST", "/responses", other, next)
	if status != 400 || !strings.Contains(string(out), "not found") {
		t.Errorf("another account's references: %d %s, want 400 not found", status, out)
	}
}

// GET /v1/models lists a model's context window and reasoning efforts
// where the configuration gives them, members of the gateway's own that
// the specification's Model leaves room for; a model without them lists
// neither.
func TestModelCatalog(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	status, body := a.call(t, "GET", "/models", a.APIKey, "")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	spec.ValidateT(t, "ListModelsResponse", body)
	var list struct {
		Data []map[string]any `json:"data"`
	}
	json.Unmarshal(body, &list)
	byID := map[string]map[string]any{}
	for _, m := range list.Data {
		byID[m["id"].(string)] = m
	}
	if got := mustMarshal(t, byID["agent-claude"]); !strings.Contains(string(got), `"context_window":200000`) ||
		!strings.Contains(string(got), `"reasoning_efforts":["minimal","low","medium","high"]`) {
		t.Errorf("agent-claude: %s", got)
	}
	if m := byID["gpt-4o-mini"]; m == nil || m["context_window"] != nil || m["reasoning_efforts"] != nil {
		t.Errorf("gpt-4o-mini: %v, want no catalog members", m)
	}
	status, body = a.call(t, "GET", "/models/agent-gemini", a.APIKey, "")
	spec.ValidateT(t, "Model", body)
	if status != 200 || !strings.Contains(string(body), `"context_window":1048576`) {
		t.Errorf("GET /v1/models/agent-gemini: %d %s", status, body)
	}
}

// A file given inline (chat's file part, the Responses API's input_file
// with file_data) reaches Claude as a document block, Gemini as inline
// data and Bedrock as a document; a file_id (OpenAI's Files API) or a URL
// the gateway would have to fetch is a 400 naming the part.
func TestFileInputs(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	const pdf = "data:application/pdf;base64,JVBERi0xLjQK"
	for _, model := range []string{"agent-claude", "agent-gemini", "agent-bedrock"} {
		for _, endpoint := range []string{"/chat/completions", "/responses"} {
			marker := "file-" + model + endpoint
			body := `{"model":"` + model + `","messages":[{"role":"user","content":[{"type":"text","text":"` + marker + `"},{"type":"file","file":{"filename":"q3 report.pdf","file_data":"` + pdf + `"}}]}]}`
			if endpoint == "/responses" {
				body = `{"model":"` + model + `","input":[{"role":"user","content":[{"type":"input_text","text":"` + marker + `"},{"type":"input_file","filename":"q3 report.pdf","file_data":"` + pdf + `"}]}]}`
			}
			if status, out := a.call(t, "POST", endpoint, a.APIKey, body); status != 200 {
				t.Errorf("%s %s: %d %s", model, endpoint, status, out)
				continue
			}
			reqs := providerRequests(t, a.Mock, marker)
			if len(reqs) != 1 {
				t.Fatalf("%s %s: %d provider requests", model, endpoint, len(reqs))
			}
			got := string(mustMarshal(t, reqs[0]))
			want := map[string]string{
				"agent-claude":  `{"source":{"data":"JVBERi0xLjQK","media_type":"application/pdf","type":"base64"},"title":"q3 report.pdf","type":"document"}`,
				"agent-gemini":  `{"inlineData":{"data":"JVBERi0xLjQK","mimeType":"application/pdf"}}`,
				"agent-bedrock": `{"document":{"format":"pdf","name":"q3 report","source":{"bytes":"JVBERi0xLjQK"}}}`,
			}[model]
			if !strings.Contains(got, want) {
				t.Errorf("%s %s: the provider got %s, want %s in it", model, endpoint, got, want)
			}
		}
	}
	for body, param := range map[string]string{
		`{"model":"agent-claude","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`:                     "messages[0].content[0].file.file_id",
		`{"model":"agent-claude","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://example.com/a.pdf"}]}]}`:         "input[0].content[0].file_url",
		`{"model":"agent-claude","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:image/gif;base64,R0lG"}}]}]}`: "messages[0].content[0].file.file_data",
	} {
		endpoint := "/chat/completions"
		if strings.Contains(body, `"input"`) {
			endpoint = "/responses"
		}
		status, out := a.call(t, "POST", endpoint, a.APIKey, body)
		var e struct{ Error struct{ Param string } }
		json.Unmarshal(out, &e)
		if status != 400 || e.Error.Param != param {
			t.Errorf("%s: %d %s, want a 400 on %s", body, status, out, param)
		}
	}
}
