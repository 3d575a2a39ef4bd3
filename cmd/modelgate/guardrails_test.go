package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/translate/api/spec"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest/clienttext"
)

// guardConfig is a dev config of the scripted agent models on four
// providers and a Fallback model over two of them, with the two
// rules, the response rule's action as given.
func guardConfig(t *testing.T, action string) string {
	t.Helper()
	cfg := `backends:
  - {name: mock, provider: openai, base_url: "http://unused", api_key_env: UNUSED}
  - {name: mock-anthropic, provider: anthropic, base_url: "http://unused", api_key_env: UNUSED}
  - {name: mock-gemini, provider: gemini, base_url: "http://unused", api_key_env: UNUSED}
  - {name: mock-bedrock, provider: bedrock, base_url: "http://unused", region: us-east-1, api_key_env: UNUSED}
models:
  - {id: agent-gpt, deployments: [{backend: mock, model: mock-agent}]}
  - {id: agent-claude, deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}]}
  - {id: agent-gemini, deployments: [{backend: mock-gemini, model: gemini-3-mock-agent}]}
  - {id: agent-bedrock, deployments: [{backend: mock-bedrock, model: "us.anthropic.claude-sonnet-4-5-mock-agent-v1:0"}]}
  - id: agent-fallback
    deployments:
      - {backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}
      - {backend: mock-gemini, model: gemini-3-mock-agent, priority: 1}
    fallback: {retry_on: [5xx]}
guardrails:
  rules:
    - {name: no-forbidden, phase: request, regex: {patterns: ["(?i)forbidden-word"]}, action: block}
    - {name: no-zebra, phase: response, regex: {patterns: ["zebra-[0-9]+"]}, action: ` + action + `}
`
	path := filepath.Join(t.TempDir(), "guard.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var guardModels = []string{"agent-gpt", "agent-claude", "agent-gemini", "agent-bedrock", "agent-fallback"}

// guardDoor is a front door, and what its answers' end looks like.
type guardDoor struct {
	name, path string
	body       func(model, prompt string, stream bool) string
}

var guardDoors = []guardDoor{
	{"chat", "/chat/completions", func(model, prompt string, stream bool) string {
		extra := ""
		if stream {
			extra = `,"stream":true,"stream_options":{"include_usage":true}`
		}
		return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]%s}`, model, prompt, extra)
	}},
	{"responses", "/responses", func(model, prompt string, stream bool) string {
		return fmt.Sprintf(`{"model":%q,"input":%q,"stream":%v}`, model, prompt, stream)
	}},
	{"messages", "/messages", func(model, prompt string, stream bool) string {
		return fmt.Sprintf(`{"model":%q,"max_tokens":1000,"messages":[{"role":"user","content":%q}],"stream":%v}`, model, prompt, stream)
	}},
}

// guardCall sends a request through the front door, with the client's
// own credentials header and a client request id to find its record by.
func guardCall(t *testing.T, a devAddrs, d guardDoor, body, requestID string) (*http.Response, []byte) {
	t.Helper()
	if d.name == "messages" {
		return anthropicCall(t, "POST", a.Gateway+d.path, a.APIKey, body, "x-request-id", requestID)
	}
	return anthropicCall(t, "POST", a.Gateway+d.path, "", body, "authorization", "Bearer "+a.APIKey, "x-request-id", requestID)
}

// answerText is the generated text the client got: a JSON answer's, or
// a stream's deltas joined.
func answerText(t *testing.T, door string, body []byte, stream bool) string {
	t.Helper()
	if !stream {
		var a struct {
			Choices []struct{ Message struct{ Content string } }
			Content []struct{ Text string }
			Output  []struct{ Content []struct{ Text string } }
		}
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		var b strings.Builder
		for _, c := range a.Choices {
			b.WriteString(c.Message.Content)
		}
		for _, c := range a.Content {
			b.WriteString(c.Text)
		}
		for _, o := range a.Output {
			for _, c := range o.Content {
				b.WriteString(c.Text)
			}
		}
		return b.String()
	}
	var b strings.Builder
	var dec sse.Decoder
	for _, ev := range dec.Feed(body) {
		var e struct {
			Type    string
			Delta   json.RawMessage
			Choices []struct{ Delta struct{ Content string } }
		}
		if json.Unmarshal(ev.Data, &e) != nil {
			continue
		}
		for _, c := range e.Choices {
			b.WriteString(c.Delta.Content)
		}
		var s string
		var d struct{ Text string }
		switch {
		case e.Type == "response.output_text.delta" && json.Unmarshal(e.Delta, &s) == nil:
			b.WriteString(s)
		case e.Type == "content_block_delta" && json.Unmarshal(e.Delta, &d) == nil:
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// endOf is how the answer ended, in its API's words: chat's last
// finish_reason, a Responses answer's status and incomplete reason, a
// Messages answer's stop_reason.
func endOf(t *testing.T, door string, body []byte, stream bool) string {
	t.Helper()
	type end struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		}
		Status            string
		IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
		StopReason        string                   `json:"stop_reason"`
		Delta             struct {
			StopReason string `json:"stop_reason"`
		}
		Response *end
	}
	read := func(e end) string {
		switch {
		case len(e.Choices) > 0 && e.Choices[0].FinishReason != "":
			return e.Choices[0].FinishReason
		case e.Status != "" && e.IncompleteDetails != nil:
			return e.Status + "/" + e.IncompleteDetails.Reason
		case e.Status != "":
			return e.Status
		case e.StopReason != "":
			return e.StopReason
		case e.Delta.StopReason != "":
			return e.Delta.StopReason
		case e.Response != nil && e.Response.Status != "" && e.Response.Status != "in_progress":
			e := *e.Response
			if e.IncompleteDetails != nil {
				return e.Status + "/" + e.IncompleteDetails.Reason
			}
			return e.Status
		}
		return ""
	}
	if !stream {
		var e end
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return read(e)
	}
	last := ""
	var dec sse.Decoder
	for _, ev := range dec.Feed(body) {
		var e end
		if json.Unmarshal(ev.Data, &e) == nil {
			if r := read(e); r != "" {
				last = r
			}
		}
	}
	return last
}

var guardRequests atomic.Int64

// A request rule refuses a request on every front door in its client's
// shape before any of it reaches a provider; a response rule that blocks
// ends the answer with each client API's own refusal, and no byte of the
// match reaches the client, JSON and streamed, on every model, a Fallback
// model's included. The ledger records what each rule did.
func TestGuardrailsBlockOnEveryDoor(t *testing.T) {
	a := startDev(t, func(string) string { return "" }, "--config", guardConfig(t, "block"))
	for _, model := range guardModels {
		for _, d := range guardDoors {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", model, d.name, stream), func(t *testing.T) {
					id := fmt.Sprintf("guard-%d", guardRequests.Add(1))
					res, body := guardCall(t, a, d, d.body(model, "say FORBIDDEN-WORD please", stream), id)
					if got := providerGot(a, res.Header.Get("x-request-id")); res.StatusCode != 400 || len(got) != 0 {
						t.Fatalf("forbidden: %d, %d requests reached the mock: %s", res.StatusCode, len(got), body)
					}
					var e struct {
						Error struct{ Type, Code string }
					}
					json.Unmarshal(body, &e) //nolint:errcheck // checked below
					want := "invalid_request_error/content_filter"
					if d.name == "messages" {
						want = "invalid_request_error/"
					}
					if got := e.Error.Type + "/" + e.Error.Code; got != want || res.Header.Get("x-should-retry") != "false" {
						t.Errorf("forbidden: %s, x-should-retry %q", body, res.Header.Get("x-should-retry"))
					}
					checkRecord(t, a, id, "no-forbidden/request/blocked")

					id = fmt.Sprintf("guard-%d", guardRequests.Add(1))
					res, body = guardCall(t, a, d, d.body(model, "repeat zebra-42 twice", stream), id)
					if res.StatusCode != 200 {
						t.Fatalf("zebra: %d %s", res.StatusCode, body)
					}
					if strings.Contains(clienttext.Strings(t, body, stream), "zebra-42") {
						t.Fatalf("the match reached the client: %s", body)
					}
					want = map[string]string{"chat": "content_filter", "responses": "incomplete/content_filter", "messages": "refusal"}[d.name]
					if got := endOf(t, d.name, body, stream); got != want {
						t.Errorf("the answer ended %q, want %q: %s", got, want, body)
					}
					validateDoor(t, d.name, body, stream)
					checkRecord(t, a, id, "no-forbidden/request/allowed", "no-zebra/response/blocked")
				})
			}
		}
	}
}

// validateDoor checks an OpenAI API's answer against the specification.
func validateDoor(t *testing.T, door string, body []byte, stream bool) {
	t.Helper()
	switch {
	case door == "chat" && stream:
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", body)
	case door == "chat":
		spec.ValidateT(t, "CreateChatCompletionResponse", body)
	case door == "responses" && stream:
		spec.ValidateSSE(t, "ResponseStreamEvent", body)
	case door == "responses":
		spec.ValidateT(t, "Response", body)
	case stream: // Messages: the documented sequence of events
		messageOfEvents(t, parseEvents(t, body))
	}
}

// checkRecord waits for the ledger record of the request the client
// named id and checks what its rules did, as rule/phase/result.
func checkRecord(t *testing.T, a devAddrs, id string, want ...string) {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, body := a.admin(t, "GET", "/admin/v1/requests?limit=20", "")
		var page struct {
			Data []struct {
				ClientRequestID string `json:"client_request_id"`
				Guardrails      []struct{ Rule, Phase, Result string }
			}
		}
		json.Unmarshal(body, &page) //nolint:errcheck // an empty page waits
		for _, r := range page.Data {
			if r.ClientRequestID != id {
				continue
			}
			got = got[:0]
			for _, g := range r.Guardrails {
				got = append(got, g.Rule+"/"+g.Phase+"/"+g.Result)
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("the record says %v, want %v", got, want)
			}
			return
		}
	}
	t.Errorf("no record of %s", id)
}

// Masking returns the answer with the match masked, the same mask on
// every door; monitoring returns it untouched and the record says
// monitored.
func TestGuardrailsMaskAndMonitor(t *testing.T) {
	for _, action := range []string{"mask", "monitor"} {
		t.Run(action, func(t *testing.T) {
			a := startDev(t, func(string) string { return "" }, "--config", guardConfig(t, action))
			masks := map[string]bool{}
			for _, model := range guardModels {
				for _, d := range guardDoors {
					for _, stream := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/%s/stream=%v", model, d.name, stream), func(t *testing.T) {
							id := fmt.Sprintf("guard-%d", guardRequests.Add(1))
							res, body := guardCall(t, a, d, d.body(model, "repeat zebra-42 twice", stream), id)
							if res.StatusCode != 200 {
								t.Fatalf("%d %s", res.StatusCode, body)
							}
							text := answerText(t, d.name, body, stream)
							if !strings.HasPrefix(text, "You said: repeat ") || !strings.HasSuffix(text, " twice") {
								t.Fatalf("the answer %q", text)
							}
							middle := strings.TrimSuffix(strings.TrimPrefix(text, "You said: repeat "), " twice")
							switch action {
							case "mask":
								if !strings.HasPrefix(middle, "[masked:") || strings.Contains(clienttext.Strings(t, body, stream), "zebra-42") {
									t.Errorf("the match reached the client: %s", body)
								}
								masks[middle] = true
								checkRecord(t, a, id, "no-forbidden/request/allowed", "no-zebra/response/masked")
							case "monitor":
								if middle != "zebra-42" {
									t.Errorf("monitored answer %q", text)
								}
								checkRecord(t, a, id, "no-forbidden/request/allowed", "no-zebra/response/monitored")
							}
							if end := endOf(t, d.name, body, stream); end != "stop" && end != "completed" && end != "end_turn" {
								t.Errorf("the answer ended %q", end)
							}
							validateDoor(t, d.name, body, stream)
						})
					}
				}
			}
			if action == "mask" && len(masks) != 1 {
				t.Errorf("the match was masked %d ways: %v", len(masks), masks)
			}
		})
	}
}

// A conversation rule reads the stored conversation a Responses request
// continues: a match split across previous_response_id turns is blocked.
// A rule that reads each message alone lets it pass.
func TestGuardrailsConversationAcrossTurns(t *testing.T) {
	for _, conversation := range []bool{true, false} {
		t.Run(fmt.Sprintf("conversation=%v", conversation), func(t *testing.T) {
			cfg := fmt.Sprintf(`backends:
  - {name: mock, provider: openai, base_url: "http://unused", api_key_env: UNUSED}
  - {name: mock-anthropic, provider: anthropic, base_url: "http://unused", api_key_env: UNUSED}
models:
  - {id: agent-gpt, deployments: [{backend: mock, model: mock-agent}]}
  - {id: agent-claude, deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}]}
guardrails:
  rules:
    - {name: no-forbidden, phase: request, regex: {patterns: ["forbidden-word"]}, action: block, conversation: %v}
`, conversation)
			path := filepath.Join(t.TempDir(), "guard.yaml")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			a := startDev(t, func(string) string { return "" }, "--config", path)
			for _, model := range []string{"agent-gpt", "agent-claude"} { // passthrough and bridge
				status, body := a.call(t, "POST", "/responses", a.APIKey, fmt.Sprintf(`{"model":%q,"input":"remember: forbidden-"}`, model))
				var first struct{ ID string }
				if json.Unmarshal(body, &first) != nil || status != 200 || first.ID == "" {
					t.Fatalf("%s turn 1: %d %s", model, status, body)
				}
				status, body = a.call(t, "POST", "/responses", a.APIKey, fmt.Sprintf(`{"model":%q,"previous_response_id":%q,"input":"word"}`, model, first.ID))
				if blocked := status == 400 && strings.Contains(string(body), "content_filter"); blocked != conversation {
					t.Errorf("%s turn 2: %d %s", model, status, body)
				}
			}
			// One chat request, the match split across its user messages.
			status, body := a.call(t, "POST", "/chat/completions", a.APIKey, `{"model":"agent-gpt","messages":[{"role":"user","content":"forbidden-"},
				{"role":"assistant","content":"ok"},{"role":"user","content":"word"}]}`)
			if blocked := status == 400; blocked != conversation {
				t.Errorf("chat: %d %s", status, body)
			}
		})
	}
}

// An optional rule runs on the requests of the key that adds it by name
// and of no other: two streams at once, one key's answer blocked, the
// other key's untouched.
func TestGuardrailsOptionalRuleOnOneKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "guard.yaml")
	cfg := `backends:
  - {name: mock, provider: openai, base_url: "http://unused", api_key_env: UNUSED}
models:
  - {id: agent-gpt, deployments: [{backend: mock, model: mock-agent}]}
guardrails:
  rules:
    - {name: no-zebra, phase: response, regex: {patterns: ["zebra-[0-9]+"]}, action: block, optional: true}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startDev(t, func(string) string { return "" }, "--config", path)
	_, body := a.admin(t, "GET", "/admin/v1/accounts", "")
	var accounts struct{ Data []struct{ ID string } }
	if json.Unmarshal(body, &accounts) != nil || len(accounts.Data) == 0 {
		t.Fatalf("accounts: %s", body)
	}
	status, body := a.admin(t, "POST", "/admin/v1/accounts/"+accounts.Data[0].ID+"/keys", `{"name":"guarded","guardrails":["no-zebra"]}`)
	var created struct{ Secret string }
	if json.Unmarshal(body, &created) != nil || status != 201 && status != 200 || created.Secret == "" {
		t.Fatalf("creating a key: %d %s", status, body)
	}
	stream := `{"model":"agent-gpt","stream":true,"messages":[{"role":"user","content":"repeat zebra-42 twice"}]}`
	results := make(chan [2]string, 2)
	for _, key := range []string{a.APIKey, created.Secret} {
		go func() {
			_, body := send(t, "POST", a.Gateway+"/chat/completions", key, "application/json", stream)
			results <- [2]string{key, string(body)}
		}()
	}
	for range 2 {
		r := <-results
		blocked := endOf(t, "chat", []byte(r[1]), true) == "content_filter"
		if guarded := r[0] == created.Secret; blocked != guarded || guarded && strings.Contains(r[1], "zebra-42") {
			t.Errorf("the guarded key's stream (%v) ended blocked: %v\n%s", guarded, blocked, r[1])
		}
	}
}

// Request rules hold on every front door that takes the client's text: a
// block refuses it before any provider, a mask reaches the provider as
// the mask, the same one on every door, and nothing of what matched.
func TestGuardrailsRequestMaskOnEveryDoor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "guard.yaml")
	cfg := `backends:
  - {name: mock, provider: openai, base_url: "http://unused", api_key_env: UNUSED}
  - {name: mock-anthropic, provider: anthropic, base_url: "http://unused", api_key_env: UNUSED}
models:
  - {id: agent-gpt, deployments: [{backend: mock, model: mock-agent}]}
  - {id: agent-claude, deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}]}
  - {id: text-embedding-3-small, deployments: [{backend: mock, model: text-embedding-3-small}]}
  - {id: dall-e-3, deployments: [{backend: mock, model: dall-e-3}]}
guardrails:
  rules:
    - {name: no-forbidden, phase: request, regex: {patterns: ["(?i)forbidden-word"]}, action: block}
    - {name: mask-zebra, phase: request, regex: {patterns: ["zebra-[0-9]+"]}, action: mask, parts: [user, tool_result]}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startDev(t, func(string) string { return "" }, "--config", path)
	masks := map[string]bool{}
	for _, tt := range []struct{ name, path, body string }{
		{"chat", "/chat/completions", `{"model":"agent-gpt","messages":[{"role":"user","content":"keep %s safe"}]}`},
		{"chat on Anthropic", "/chat/completions", `{"model":"agent-claude","messages":[{"role":"user","content":[{"type":"text","text":"keep %s safe"}]}]}`},
		{"responses", "/responses", `{"model":"agent-gpt","input":"keep %s safe"}`},
		{"responses bridge", "/responses", `{"model":"agent-claude","input":[{"role":"user","content":[{"type":"input_text","text":"keep %s safe"}]}]}`},
		{"messages", "/messages", `{"model":"agent-claude","max_tokens":100,"messages":[{"role":"user","content":"keep %s safe"}]}`},
		{"messages bridge", "/messages", `{"model":"agent-gpt","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"keep %s safe"}]}]}`},
		{"embeddings", "/embeddings", `{"model":"text-embedding-3-small","input":["first","keep %s safe"]}`},
		{"images", "/images/generations", `{"model":"dall-e-3","prompt":"keep %s safe"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := guardDoor{name: strings.TrimPrefix(tt.path, "/"), path: tt.path}
			res, body := guardCall(t, a, d, fmt.Sprintf(tt.body, "forbidden-word"), "")
			got := providerGot(a, res.Header.Get("x-request-id"))
			if res.StatusCode != 400 || len(got) != 0 || !strings.Contains(string(body), "no-forbidden") {
				t.Fatalf("forbidden: %d, reached the mock: %d, %s", res.StatusCode, len(got), body)
			}
			res, body = guardCall(t, a, d, fmt.Sprintf(tt.body, "zebra-42"), "")
			got = providerGot(a, res.Header.Get("x-request-id"))
			if res.StatusCode != 200 || len(got) != 1 {
				t.Fatalf("zebra: %d, %d provider requests: %s", res.StatusCode, len(got), body)
			}
			up := string(got[0])
			mask := regexp.MustCompile(`\[masked:[0-9a-f]{8}\]`).FindString(up)
			if strings.Contains(up, "zebra-42") || mask == "" || !strings.Contains(up, "keep "+mask+" safe") {
				t.Fatalf("the provider got %s", up)
			}
			masks[mask] = true
		})
	}
	if len(masks) != 1 {
		t.Errorf("masks %v, want one for the one value", masks)
	}
}

// providerGot are the bodies the mock's model endpoints (not its guard
// services') got for the request the gateway named id (x-request-id).
func providerGot(a devAddrs, id string) [][]byte {
	var out [][]byte
	for _, r := range a.Mock.Requests() {
		if id != "" && r.Header.Get("x-request-id") == id && !strings.HasPrefix(r.Path, "/guard/") {
			out = append(out, r.Body)
		}
	}
	return out
}

// Response rules read what a transcription heard, in every format: a
// mask masks it (segments and subtitles too), a block is the
// content_filter error (its API has no refusal of its own).
func TestGuardrailsTranscription(t *testing.T) {
	path := filepath.Join(t.TempDir(), "guard.yaml")
	cfg := `backends:
  - {name: mock, provider: openai, base_url: "http://unused", api_key_env: UNUSED}
models:
  - {id: whisper-1, deployments: [{backend: mock, model: whisper-1}]}
  - {id: whisper-blocked, deployments: [{backend: mock, model: whisper-1}]}
guardrails:
  rules:
    - {name: mask-sun, phase: response, regex: {patterns: ["(?i)\\bsun\\b"]}, action: mask, models: [whisper-1]}
    - {name: heard-block, phase: response, regex: {patterns: ["(?i)\\bsun\\b"]}, action: block, models: [whisper-blocked]}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startDev(t, func(string) string { return "" }, "--config", path)
	form := func(model, format string) string {
		return "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" + model + "\r\n" +
			"--b\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\n" + format + "\r\n" +
			"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF\x24\x08\x00\x00WAVEfmt \r\n--b--\r\n"
	}
	sun := regexp.MustCompile(`(?i)\bsun\b`)
	for _, format := range []string{"json", "text", "srt", "vtt", "verbose_json"} {
		status, body := send(t, http.MethodPost, a.Gateway+"/audio/transcriptions", a.APIKey, "multipart/form-data; boundary=b", form("whisper-1", format))
		if status != 200 || sun.Match(body) || !maskRE.Match(body) || !strings.Contains(string(body), "rises") {
			t.Errorf("%s, masked: %d %s", format, status, body)
		}
		if strings.HasSuffix(format, "json") && !json.Valid(body) {
			t.Errorf("%s: not JSON: %s", format, body)
		}
		status, body = send(t, http.MethodPost, a.Gateway+"/audio/transcriptions", a.APIKey, "multipart/form-data; boundary=b", form("whisper-blocked", format))
		if status != 400 || !strings.Contains(string(body), "content_filter") || !strings.Contains(string(body), "answer was blocked") || sun.Match(body) {
			t.Errorf("%s, blocked: %d %s", format, status, body)
		}
	}
}
