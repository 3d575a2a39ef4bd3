package translate_test

import (
	"path/filepath"
	"testing"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api"
	"modelgate/translate/azure"
	"modelgate/translate/bedrock"
	"modelgate/translate/cohere"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
	"modelgate/translate/translatetest"
	"modelgate/translate/vertex"
)

// requestCases are the things that must survive translation to every
// provider. Each provider's upstream body (or its clear 400) is a golden
// file under testdata/requests/<provider>/<case>.json, reviewed by hand.
var requestCases = map[string]string{
	"system-developer-history": `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"developer","content":"Answer in French."},
		{"role":"user","content":"Hi"},{"role":"assistant","content":"Bonjour"},{"role":"user","content":"Capital of Italy?"}]}`,
	"tools-parallel-results": `{"model":"m","messages":[{"role":"user","content":"Weather in Paris and Rome?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
			{"id":"call_2","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"21C"},{"role":"tool","tool_call_id":"call_2","content":"25C"}],
		"tools":[{"type":"function","function":{"name":"weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
		"tool_choice":"auto","parallel_tool_calls":true}`,
	"named-tool-choice": `{"model":"m","messages":[{"role":"user","content":"Weather?"}],
		"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"weather"}}}`,
	"image-data-uri": `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`,
	"image-http-url": `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`,
	"json-schema": `{"model":"m","messages":[{"role":"user","content":"City?"}],
		"response_format":{"type":"json_schema","json_schema":{"name":"city","schema":{"type":"object","properties":{"city":{"type":"string"}}}}}}`,
	"json-object":         `{"model":"m","messages":[{"role":"user","content":"City as JSON?"}],"response_format":{"type":"json_object"}}`,
	"reasoning-effort":    `{"model":"m","messages":[{"role":"user","content":"Think."}],"reasoning_effort":"medium"}`,
	"sampling-and-limits": `{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_completion_tokens":123,"temperature":0.4,"top_p":0.9,"stop":["END","STOP"]}`,
	"n-greater-than-one":  `{"model":"m","messages":[{"role":"user","content":"Hi"}],"n":2}`,
	"stream":              `{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true}`,
	// A top-level marker (automatic caching, as some clients ask Anthropic
	// for it) reaches no provider that would refuse it.
	"top-level-cache-control": `{"model":"m","messages":[{"role":"user","content":"Hi"}],"cache_control":{"type":"ephemeral"}}`,
	"cache-control": `{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"You are a careful coder.","cache_control":{"type":"ephemeral","ttl":"1h"}}]},
		{"role":"user","content":[{"type":"text","text":"Here is the repository."},{"type":"text","text":"Read main.go.","cache_control":{"type":"ephemeral"}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":\"main.go\"}"}}],"cache_control":{"type":"ephemeral"}},
		{"role":"tool","tool_call_id":"call_1","content":"package main"},{"role":"user","content":"Explain it."}],
		"tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}},"cache_control":{"type":"ephemeral","ttl":"1h"}}]}`,
	"file-pdf": `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Summarize."},
		{"type":"file","file":{"filename":"Q3 report (final).pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQK"}}]}]}`,
}

type provider struct {
	name   string
	model  string
	newFor func(translate.Target, *api.ChatRequest) translate.Translator
}

func providers() []provider {
	out := []provider{
		{"openai", "gpt-4o", openai.NewChat},
		{"anthropic", "claude-sonnet-4-20250514", anthropic.NewChat},
		{"azure", "my-deployment", azure.NewChat},
		{"bedrock", "us.anthropic.claude-sonnet-4-20250514-v1:0", bedrock.NewChat},
		{"gemini", "gemini-2.5-flash", gemini.NewChat},
		{"vertex-gemini", "gemini-2.5-flash", vertex.NewChat},
		{"vertex-anthropic", "claude-sonnet-4@20250514", vertex.NewChat},
		{"cohere", "command-a-03-2025", cohere.NewChat},
	}
	for _, name := range []string{"mistral", "deepseek", "groq"} {
		out = append(out, provider{name, name + "-model", openai.NewCompatibleChat(openai.CompatibleProviders()[name])})
	}
	return out
}

func TestRequestGoldens(t *testing.T) {
	for _, p := range providers() {
		for name, body := range requestCases {
			t.Run(p.name+"/"+name, func(t *testing.T) {
				req, err := api.ParseChatRequest([]byte(body))
				if err != nil {
					t.Fatalf("case is not a valid request: %v", err)
				}
				target := translate.Target{Backend: "b", Provider: p.name, Model: p.model, APIKey: "provider-key", Project: "proj", Region: "us-east5"}
				up, err := p.newFor(target, req).RequestBody()
				translatetest.Golden(t, filepath.Join("testdata", "requests", p.name, name+".json"), translatetest.UpstreamJSON(t, up, err))
			})
		}
	}
}
