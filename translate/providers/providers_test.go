package providers

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// target is a deployment every provider can sign or authorize a request
// for.
var target = translate.Target{Backend: "b", Model: "m", APIKey: "provider-key", Host: "example.com", Region: "us-east-1",
	Project: "p", AWS: translate.AWSCredentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}}

// Every provider in the table builds a chat translator whose upstream
// request carries the provider's credential and never an empty body, and
// the names are the table's keys.
func TestEveryProviderServesChat(t *testing.T) {
	req, err := api.ParseChatRequest([]byte(`{"model":"public","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	names := Names()
	if len(names) < 10 {
		t.Fatalf("only %d providers: %v", len(names), names)
	}
	for _, p := range All() {
		if got, ok := Lookup(p.Name); !ok || got.Name != p.Name {
			t.Errorf("Lookup(%q) = %q, %v", p.Name, got.Name, ok)
		}
		tg := target
		tg.Provider = p.Name
		up, err := p.Chat(tg, req).RequestBody()
		if err != nil {
			t.Errorf("%s: %v", p.Name, err)
			continue
		}
		if !json.Valid(up.Body) || !strings.Contains(string(up.Body), "hi") {
			t.Errorf("%s: upstream body %s", p.Name, up.Body)
		}
		signed := false
		for _, h := range up.Headers {
			signed = signed || strings.Contains(h.Value, "provider-key") || strings.Contains(h.Value, "AKID")
		}
		if !signed {
			t.Errorf("%s: no credential in %v", p.Name, up.Headers)
		}
	}
	if _, ok := Lookup("antropic"); ok {
		t.Error("an unknown provider was found")
	}
}

// The endpoints each provider serves, as a table a reviewer reads in the
// diff of a change that adds or moves a provider.
func TestEndpointTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("provider            chat  responses        embeddings  images  transcription\n")
	mark := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "-"
	}
	for _, p := range All() {
		resp := "via chat"
		if p.Responses != nil {
			resp = "native"
		}
		b.WriteString(pad(p.Name, 20) + pad(mark(p.Chat != nil), 6) + pad(resp, 17) + pad(mark(p.Embeddings != nil), 12) +
			pad(mark(p.Images != nil), 8) + mark(p.Transcription != nil) + "\n")
	}
	translatetest.Golden(t, "testdata/endpoints.txt", []byte(b.String()))
}

func pad(s string, n int) string { return s + strings.Repeat(" ", max(1, n-len(s))) }

// The providers that search the web themselves, as the config's
// validation knows them.
func TestWebSearchProviders(t *testing.T) {
	var got []string
	for _, p := range All() {
		if p.WebSearch {
			got = append(got, p.Name)
		}
	}
	if want := []string{"anthropic", "azure", "gemini", "openai", "vertex"}; !slices.Equal(got, want) {
		t.Errorf("web search providers %v, want %v", got, want)
	}
}

// CountsTokens is what building a count_tokens translator tells: a
// translator for the models it names, none for the others.
func TestCountsTokens(t *testing.T) {
	for _, p := range All() {
		for _, model := range []string{"claude-sonnet-4-5", "us.anthropic.claude-sonnet-4-5-v1:0", "gpt-4o", "gemini-2.5-pro"} {
			built := p.CountTokens != nil && p.CountTokens(translate.Target{Provider: p.Name, Model: model}, &api.MessagesRequest{}) != nil
			if got := p.CountsTokens(model); got != built {
				t.Errorf("%s.CountsTokens(%q) = %v, its translator %v", p.Name, model, got, built)
			}
		}
	}
	if p, _ := Lookup("bedrock"); p.CountsTokens("amazon.nova-pro-v1:0") || !p.CountsTokens("anthropic.claude-3-haiku") {
		t.Error("bedrock counts Claude's tokens alone")
	}
}
