package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"modelgate/translate/api/spec"
)

// modelsConfig is the config: two models named by agents' vendor
// ids, an auto model over them, run on dev's mock backends (which the
// file need not declare), with prices that make g-gpt the cheaper; and
// a Fallback model and two of Bedrock's Nova, one set to serve a request
// without the reasoning it lacks.
const modelsConfig = `models:
  - id: g-claude
    aliases: ["claude-sonnet-4-5*", "claude-haiku-*"]
    capabilities: {input: [text, image]}
    deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}]
  - id: g-gpt
    aliases: ["gpt-5-codex*", {name: codex-house, listed: true}]
    capabilities: {input: [text]}
    deployments: [{backend: mock, model: mock-agent}]
  - {id: auto, auto: {candidates: [g-gpt, g-claude], prefer: cheapest}}
  - id: g-fallback
    aliases: ["fb-*"]
    deployments: [{backend: mock-anthropic, model: claude-sonnet-4-5-mock-agent}, {backend: mock, model: mock-agent, priority: 1}]
    fallback: {retry_on: [5xx]}
  - id: g-nova
    aliases: ["nova-agent-*"]
    capabilities: {drop: [reasoning]}
    deployments: [{backend: mock-bedrock, model: "us.amazon.nova-micro-v1:0"}]
  - id: g-nova-strict
    deployments: [{backend: mock-bedrock, model: "us.amazon.nova-micro-v1:0"}]
  - id: g-embed
    aliases: ["text-embedding-*"]
    deployments: [{backend: mock, model: text-embedding-3-small}]
  - id: g-image
    aliases: ["dall-e-*"]
    deployments: [{backend: mock, model: gpt-image-1-mini}]
  - id: g-whisper
    aliases: ["whisper-*"]
    deployments: [{backend: mock, model: whisper-1}]
prices:
  models:
    - {model: g-gpt, input: "1.00", output: "4.00"}
    - {model: g-claude, input: "3.00", output: "15.00"}
`

const pngPixel = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="

// Agents' vendor ids reach the operator's models through aliases, and an
// auto model routes by what a request uses, on every front door: each
// answer, JSON and streamed, names the model the client asked for; its
// headers name the model that served it and the provider's id; the
// ledger records both names; per-key access is to the resolved model;
// /v1/models lists the models, auto and their capabilities, not the
// aliases.
func TestModelNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(path, []byte(modelsConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startDev(t, func(string) string { return "" }, "--config", path)
	chat := func(content string, stream bool) string {
		extra := ""
		if stream {
			extra = `,"stream":true`
		}
		return `{"model":%q,"messages":[{"role":"user","content":` + content + `}]` + extra + `}`
	}
	image := `[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"` + pngPixel + `"}}]`
	for _, tt := range []struct {
		door, name, model, body string
		stream                  bool
	}{
		{"messages", "claude-sonnet-4-5-20250929", "g-claude", `{"model":%q,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"messages", "claude-haiku-4-5-20251001", "g-claude", `{"model":%q,"max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"messages/count_tokens", "claude-haiku-4-5-20251001", "g-claude", `{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"chat/completions", "gpt-5-codex-mini", "g-gpt", chat(`"hi"`, false), false},
		{"chat/completions", "gpt-5-codex-mini", "g-gpt", chat(`"hi"`, true), true},
		{"responses", "gpt-5-codex", "g-gpt", `{"model":%q,"input":"hi"}`, false},
		{"responses", "gpt-5-codex", "g-gpt", `{"model":%q,"input":"hi","stream":true}`, true},
		{"responses", "claude-sonnet-4-5", "g-claude", `{"model":%q,"input":"hi","stream":true}`, true},
		{"chat/completions", "claude-sonnet-4-5", "g-claude", chat(`"hi"`, false), false},
		{"messages", "gpt-5-codex", "g-gpt", `{"model":%q,"max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"chat/completions", "fb-1", "g-fallback", chat(`"hi"`, false), false}, // the attempts resolve it too
		{"messages", "fb-2", "g-fallback", `{"model":%q,"max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"chat/completions", "auto", "g-gpt", chat(`"hi"`, false), false}, // the cheaper
		{"chat/completions", "auto", "g-claude", chat(image, true), true}, // g-gpt reads no images
		{"messages", "auto", "g-gpt", `{"model":%q,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"embeddings", "text-embedding-3-large", "g-embed", `{"model":%q,"input":"hi"}`, false},
		{"chat/completions", "codex-house", "g-gpt", chat(`"hi"`, false), false},
	} {
		d := guardDoor{name: strings.Split(tt.door, "/")[0], path: "/" + tt.door}
		id := fmt.Sprintf("names-%d", guardRequests.Add(1))
		res, body := guardCall(t, a, d, fmt.Sprintf(tt.body, tt.name), id)
		what := fmt.Sprintf("%s %s (stream %v)", tt.door, tt.name, tt.stream)
		if res.StatusCode != 200 {
			t.Errorf("%s: %d %s", what, res.StatusCode, body)
			continue
		}
		if got := res.Header.Get("x-modelgate-resolved-model"); got != tt.model && tt.door != "messages/count_tokens" {
			t.Errorf("%s: served by %q, want %q", what, got, tt.model)
		}
		if tt.door != "messages/count_tokens" {
			named := answerModels(t, body, tt.stream)
			if len(named) == 0 || slices.ContainsFunc(named, func(m string) bool { return m != tt.name }) {
				t.Errorf("%s: the answer names %q, want %q throughout\n%s", what, named, tt.name, body)
			}
		}
		rec := ledgerRecord(t, a, id)
		if rec.Model != tt.model || rec.RequestedModel != tt.name {
			t.Errorf("%s: recorded as %q asked as %q, want %q asked as %q", what, rec.Model, rec.RequestedModel, tt.model, tt.name)
		}
		if want := res.Header.Get("x-modelgate-provider-model"); rec.ProviderModel != want || want == "" && tt.door != "messages/count_tokens" {
			t.Errorf("%s: provider model %q recorded, %q in the header", what, rec.ProviderModel, want)
		}
	}
	// Images and transcriptions, whose answers have no model member.
	audio := strings.Repeat("RIFF\x24\x08\x00\x00WAVEfmt ", 64)
	for _, tt := range []struct{ path, contentType, body, name, model string }{
		{"/images/generations", "application/json", `{"model":"dall-e-3","prompt":"a cat"}`, "dall-e-3", "g-image"},
		{"/audio/transcriptions", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-large-v3\r\n" +
			"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\n" + audio + "\r\n--b--\r\n",
			"whisper-large-v3", "g-whisper"},
	} {
		id := fmt.Sprintf("names-%d", guardRequests.Add(1))
		res, body := anthropicCall(t, "POST", a.Gateway+tt.path, "", tt.body, "authorization", "Bearer "+a.APIKey, "content-type", tt.contentType, "x-request-id", id)
		if res.StatusCode != 200 || res.Header.Get("x-modelgate-resolved-model") != tt.model {
			t.Errorf("%s %s: %d, served by %q: %s", tt.path, tt.name, res.StatusCode, res.Header.Get("x-modelgate-resolved-model"), body)
		}
		if rec := ledgerRecord(t, a, id); rec.Model != tt.model || rec.RequestedModel != tt.name {
			t.Errorf("%s: recorded as %q asked as %q", tt.path, rec.Model, rec.RequestedModel)
		}
	}

	res, body := guardCall(t, a, guardDoors[0], guardDoors[0].body("gpt-5", "hi", false), "")
	if res.StatusCode != 404 || !strings.Contains(string(body), "model_not_found") {
		t.Errorf("a name no alias takes: %d %s", res.StatusCode, body)
	}

	// What a model lacks is refused before any provider is asked, or
	// served without where its config drops it.
	for _, tt := range []struct {
		door, body string
		status     int
		want       string
	}{
		{"chat/completions", fmt.Sprintf(chat(image, false), "gpt-5-codex"), 400, "does not support image input"},
		{"chat/completions", `{"model":"g-nova-strict","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`, 400, "does not support reasoning"},
		{"chat/completions", `{"model":"nova-agent-1","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`, 200, "reasoning_effort"},
		{"messages", `{"model":"nova-agent-1","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`, 200, "thinking"},
		{"responses", `{"model":"nova-agent-1","reasoning":{"effort":"high"},"input":"hi"}`, 200, "reasoning"},
	} {
		d := guardDoor{name: strings.Split(tt.door, "/")[0], path: "/" + tt.door}
		res, body := guardCall(t, a, d, tt.body, "")
		warning := res.Header.Get("x-modelgate-warning")
		switch {
		case res.StatusCode != tt.status:
			t.Errorf("%s: %d %s, want %d", tt.body, res.StatusCode, body, tt.status)
		case tt.status == 400 && !strings.Contains(string(body), tt.want):
			t.Errorf("%s: %s, want %q in it", tt.body, body, tt.want)
		case tt.status == 200 && !strings.Contains(warning, tt.want):
			t.Errorf("%s: warning %q, want %q in it", tt.body, warning, tt.want)
		}
	}
	if status, body := send(t, "POST", a.Gateway+"/chat/completions", a.APIKey, "application/json", fmt.Sprintf(chat(image, false), "gpt-5-codex")); status == 400 {
		spec.ValidateT(t, "ErrorResponse", body)
	}

	// Per-key access is to the model an alias names; an auto model's
	// key reaches its candidates through it.
	_, list := a.admin(t, "GET", "/admin/v1/accounts", "")
	var accounts struct{ Data []struct{ ID string } }
	json.Unmarshal(list, &accounts) //nolint:errcheck // an empty list fails below
	if len(accounts.Data) == 0 {
		t.Fatalf("accounts: %s", list)
	}
	newKey := func(models string) string {
		_, created := a.admin(t, "POST", "/admin/v1/accounts/"+accounts.Data[0].ID+"/keys", `{"name":"some models","models":`+models+`}`)
		var key struct{ Secret string }
		if json.Unmarshal(created, &key) != nil || key.Secret == "" {
			t.Fatalf("creating a key: %s", created)
		}
		return key.Secret
	}
	gptOnly, autoOnly := newKey(`["g-gpt"]`), newKey(`["auto"]`)
	for _, tt := range []struct {
		key, model string
		status     int
	}{
		{gptOnly, "gpt-5-codex-mini", 200}, {gptOnly, "claude-sonnet-4-5-20250929", 403}, {gptOnly, "auto", 403},
		{autoOnly, "auto", 200}, {autoOnly, "g-gpt", 403},
	} {
		if status, body := send(t, "POST", a.Gateway+"/chat/completions", tt.key, "application/json", fmt.Sprintf(chat(`"hi"`, false), tt.model)); status != tt.status {
			t.Errorf("%s with a key for %s: %d %s, want %d", tt.model, map[string]string{gptOnly: "g-gpt", autoOnly: "auto"}[tt.key], status, body, tt.status)
		}
	}

	checkCatalog(t, a)
}

// checkCatalog checks /v1/models in both dialects: the models, auto and
// the listed alias, each with what it can do; no unlisted alias.
func checkCatalog(t *testing.T, a devAddrs) {
	t.Helper()
	_, models := a.call(t, "GET", "/models", a.APIKey, "")
	spec.ValidateT(t, "ListModelsResponse", models)
	var page struct {
		Data []struct {
			ID           string
			Architecture *struct {
				InputModalities []string `json:"input_modalities"`
			}
			Pricing             *struct{ Prompt, Completion string }
			SupportedParameters []string `json:"supported_parameters"`
			Auto                *struct{ Candidates []string }
		}
	}
	if err := json.Unmarshal(models, &page); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		switch m.ID {
		case "g-claude":
			if m.Architecture == nil || !slices.Equal(m.Architecture.InputModalities, []string{"text", "image"}) || m.Pricing == nil ||
				m.Pricing.Prompt != "0.000003" || m.Pricing.Completion != "0.000015" {
				t.Errorf("g-claude: %+v", m)
			}
		case "g-gpt", "codex-house":
			if m.Architecture == nil || !slices.Equal(m.Architecture.InputModalities, []string{"text"}) || !slices.Contains(m.SupportedParameters, "tools") {
				t.Errorf("%s: %+v", m.ID, m)
			}
		case "auto":
			if m.Auto == nil || !slices.Equal(m.Auto.Candidates, []string{"g-gpt", "g-claude"}) || m.Architecture == nil ||
				!slices.Equal(m.Architecture.InputModalities, []string{"text", "image"}) || m.Pricing != nil {
				t.Errorf("auto: %+v", m)
			}
		case "g-nova-strict":
			if slices.Contains(m.SupportedParameters, "reasoning_effort") {
				t.Errorf("g-nova-strict lists reasoning: %v", m.SupportedParameters)
			}
		}
	}
	if want := []string{"g-claude", "g-gpt", "codex-house", "auto", "g-fallback", "g-nova", "g-nova-strict", "g-embed", "g-image", "g-whisper"}; !slices.Equal(ids, want) {
		t.Errorf("/v1/models lists %q, want %q", ids, want)
	}
	status, one := a.call(t, "GET", "/models/claude-haiku-4-5-20251001", a.APIKey, "")
	if spec.ValidateT(t, "Model", one); status != 200 || !strings.Contains(string(one), `"id":"claude-haiku-4-5-20251001"`) {
		t.Errorf("a model by the name a client sends: %d %s", status, one)
	}

	res, body := anthropicCall(t, "GET", a.Gateway+"/models", a.APIKey, "", "anthropic-version", "2023-06-01")
	var anthropic struct {
		Data []struct {
			ID           string
			Type         string
			Capabilities struct {
				ImageInput struct{ Supported bool } `json:"image_input"`
				Thinking   struct{ Supported bool }
			}
		}
		HasMore bool `json:"has_more"`
	}
	if res.StatusCode != 200 || json.Unmarshal(body, &anthropic) != nil || len(anthropic.Data) != 10 {
		t.Fatalf("the Anthropic model list: %d %s", res.StatusCode, body)
	}
	for _, m := range anthropic.Data {
		wantImage := m.ID != "g-gpt" && m.ID != "codex-house"
		if m.Type != "model" || m.Capabilities.ImageInput.Supported != wantImage || m.Capabilities.Thinking.Supported == strings.HasPrefix(m.ID, "g-nova") {
			t.Errorf("the Anthropic list's %s: %+v", m.ID, m)
		}
	}
}

// answerModels are the model names an answer gives: a JSON answer's
// model, and in a stream every event's (a chunk's, message_start's
// message's, a Responses event's response's).
func answerModels(t *testing.T, body []byte, stream bool) []string {
	t.Helper()
	var out []string
	add := func(doc []byte) {
		var v struct {
			Model    *string
			Message  *struct{ Model *string }
			Response *struct{ Model *string }
		}
		if json.Unmarshal(doc, &v) != nil {
			return
		}
		for _, m := range []*string{v.Model, ptrModel(v.Message), ptrModel(v.Response)} {
			if m != nil {
				out = append(out, *m)
			}
		}
	}
	if !stream {
		add(body)
		return out
	}
	for line := range bytes.Lines(body) {
		if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:")); ok {
			add(bytes.TrimSpace(data))
		}
	}
	return out
}

func ptrModel(v *struct{ Model *string }) *string {
	if v == nil {
		return nil
	}
	return v.Model
}

// requestRow is a request as the admin API lists it, by its names.
type requestRow struct {
	ClientRequestID string `json:"client_request_id"`
	Model           string
	RequestedModel  string `json:"requested_model"`
	ProviderModel   string `json:"provider_model"`
}

// ledgerRecord is the ledger's record of the request the client named id,
// once it is written (the ledger writes after the answer).
func ledgerRecord(t *testing.T, a devAddrs, id string) requestRow {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, body := a.admin(t, "GET", "/admin/v1/requests?limit=50", "")
		var page struct{ Data []requestRow }
		json.Unmarshal(body, &page) //nolint:errcheck // an empty page waits
		for _, r := range page.Data {
			if r.ClientRequestID == id {
				return r
			}
		}
	}
	t.Errorf("no record of %s", id)
	return requestRow{}
}

// An auto model passes by a candidate whose deployments failed three
// times in a row, until the ejection ends: the cheapest candidate
// answers 500s, and after three of them the next one serves, through the
// router-level stream of a Fallback candidate too.
func TestAutoModelEjection(t *testing.T) {
	p := newFaultProvider(t)
	g := devConfigGateway(t, fmt.Sprintf(`backends:
  - {name: faulty, provider: openai, base_url: %q, api_key_env: FAULT_PROVIDER_KEY}
models:
  - {id: broken, deployments: [{backend: faulty, model: %s}]}
  - {id: working, deployments: [{backend: faulty, model: %s}], fallback: {}}
  - {id: auto, auto: {candidates: [broken, working]}}
prices:
  models:
    - {model: broken, input: "0.10", output: "0.10"}
    - {model: working, input: "5.00", output: "5.00"}
`, p.URL, faultError500, faultOK))
	var served []string
	for range 5 {
		res, body := anthropicCall(t, "POST", g.url+"/chat/completions", "", `{"model":"auto","messages":[{"role":"user","content":"hi"}]}`,
			"authorization", "Bearer "+g.key)
		got := res.Header.Get("x-modelgate-resolved-model")
		if res.StatusCode == 200 {
			if named := answerModels(t, body, false); !slices.Equal(named, []string{"auto"}) {
				t.Errorf("the answer names %q, want auto", named)
			}
		} else {
			got = fmt.Sprint(res.StatusCode)
		}
		served = append(served, got)
	}
	if want := []string{"500", "500", "500", "working", "working"}; !slices.Equal(served, want) {
		t.Errorf("auto served %q, want %q", served, want)
	}
	if n := p.count(faultError500); n != 3 {
		t.Errorf("the broken candidate was asked %d times, want 3", n)
	}
}
