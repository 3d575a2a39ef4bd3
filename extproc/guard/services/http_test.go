package services_test

import (
	"slices"
	"strings"
	"testing"

	"modelgate/extproc/guard"
	"modelgate/extproc/guard/services"
)

// genericSpec is a generic HTTP service's spec but for its URL.
var genericSpec = services.Spec{Name: "in-house", Type: "http"}

// The generic HTTP client against its emulator, at either phase
// (testContract).
func TestHTTP(t *testing.T) {
	for _, phase := range []guard.Phase{guard.Request, guard.Response} {
		t.Run(phase.String(), func(t *testing.T) {
			testContract(t, contract{spec: genericSpec, path: "/http/check", phase: phase, spans: true})
		})
	}
}

// The service is called at its URL as it is, with the text and the
// phase as the stage, and a bearer key only if the spec has one.
func TestHTTPRequest(t *testing.T) {
	keyed := genericSpec
	keyed.APIKey = key
	for _, tt := range []struct {
		name        string
		spec        services.Spec
		phase       guard.Phase
		path, query string
		body, auth  string
	}{
		{"request", genericSpec, guard.Request, "POST /", "", `{"text":"hi","context":{"stage":"request"}}`, ""},
		{"response, keyed, a path and query", keyed, guard.Response, "POST /v1/check/", "tenant=a",
			`{"text":"hi","context":{"stage":"response"}}`, "Bearer " + key},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			if tt.query != "" {
				spec.URL = strings.TrimPrefix(tt.path, "POST ") + "?" + tt.query
			}
			got := testRequest(t, spec, tt.phase, "hi")
			if got.path != tt.path || got.query != tt.query || got.body != tt.body || got.header.Get("Authorization") != tt.auth {
				t.Errorf("call %+v, want %s?%s, body %s, Authorization %q", got, tt.path, tt.query, tt.body, tt.auth)
			}
		})
	}
}

// Block and modify flag the text, with the findings' spans (code points
// become bytes); allow passes it. A missing or unknown action, or a
// finding without its span within the text, is an error; members the
// contract does not read are ignored.
func TestHTTPAnswers(t *testing.T) {
	text := "Grüße zebra-42" // zebra-42 is code points [6, 14), bytes [8, 16)
	testAnswers(t, genericSpec, guard.Request, text, []answerCase{
		{name: "allow", answer: `{"action":"allow","findings":[]}`},
		{name: "allow, findings and unknown members", answer: `{"action":"allow","findings":[{"type":"x","start":0,"end":1}],"x":{"y":[1]}}`},
		{name: "block", answer: `{"action":"block","findings":[{"type":"ZEBRA","start":6,"end":14,"score":0.9}]}`,
			want: guard.Verdict{Flagged: true, Spans: [][2]int{{8, 16}}}},
		{name: "modify, replacement ignored", answer: `{"action":"modify","findings":[{"start":0,"end":5},{"start":6,"end":14}],"replacement":"x"}`,
			want: guard.Verdict{Flagged: true, Spans: [][2]int{{0, 7}, {8, 16}}}},
		{name: "block without findings", answer: `{"action":"block"}`, want: guard.Verdict{Flagged: true}},
		{name: "unknown action", answer: `{"action":"deny"}`, wantErr: "answer's action is not allow, block or modify"},
		{name: "action in capitals", answer: `{"action":"BLOCK"}`, wantErr: "answer's action is not allow, block or modify"},
		{name: "no action", answer: `{"findings":[]}`, wantErr: "answer has no action"},
		{name: "null action", answer: `{"action":null}`, wantErr: "answer has no action"},
		{name: "null", answer: `null`, wantErr: "answer has no action"},
		{name: "a null finding", answer: `{"action":"block","findings":[null]}`, wantErr: "finding 0 has no start or end"},
		{name: "a finding without start", answer: `{"action":"block","findings":[{"end":3}]}`, wantErr: "finding 0 has no start or end"},
		{name: "a span past the end", answer: `{"action":"block","findings":[{"start":6,"end":15}]}`, wantErr: "span 0 [6, 15) is empty or not within the text's 14 code points"},
		{name: "an empty span", answer: `{"action":"block","findings":[{"start":6,"end":6}]}`, wantErr: "span 0 [6, 6) is empty or not within the text's 14 code points"},
		{name: "findings an object", answer: `{"action":"block","findings":{}}`, wantErr: "malformed answer: member findings is not an array"},
	})
}

// A service's URL is required and absolute http or https, and the key
// where its contract needs one; the errors name the field and never
// show the URL (it may hold credentials).
func TestNewRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		spec services.Spec
		want string
	}{
		{"unknown type", services.Spec{Name: "x", Type: "nope", URL: "http://h"}, "unknown type"},
		{"no URL", services.Spec{Name: "x", Type: "presidio"}, "URL is required"},
		{"relative URL", services.Spec{Name: "x", Type: "http", URL: "/check"}, "URL is not"},
		{"other scheme", services.Spec{Name: "x", Type: "http", URL: "ftp://user:secret@h/"}, "URL is not"},
		{"unparsable URL", services.Spec{Name: "x", Type: "presidio", URL: "http://secret@[::1"}, "URL is not"},
		{"moderation, no key", services.Spec{Name: "x", Type: "openai_moderation", URL: "http://h"}, "APIKey is required"},
		{"lakera, no key", services.Spec{Name: "x", Type: "lakera", URL: "http://h"}, "APIKey is required"},
		{"content safety, no key", services.Spec{Name: "x", Type: "azure_content_safety", URL: "http://h"}, "APIKey is required"},
		{"prompt shields, no key", services.Spec{Name: "x", Type: "azure_prompt_shields", URL: "http://h"}, "APIKey is required"},
		{"severity threshold", services.Spec{Name: "x", Type: "azure_content_safety", URL: "http://h", APIKey: key, SeverityThreshold: 8}, "SeverityThreshold"},
		{"negative severity threshold", services.Spec{Name: "x", Type: "azure_content_safety", URL: "http://h", APIKey: key, SeverityThreshold: -1}, "SeverityThreshold"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := services.New(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `"x"`) {
				t.Fatalf("New = %v, %v; want an error naming the service and %q", svc, err, tt.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the URL's credentials", err)
			}
		})
	}
}

// Types lists each contract of this file set, and New builds each.
func TestTypes(t *testing.T) {
	for _, typ := range []string{"presidio", "openai_moderation", "lakera", "http", "azure_content_safety", "azure_prompt_shields"} {
		if !slices.Contains(services.Types(), typ) {
			t.Errorf("Types() = %v, want %q in it", services.Types(), typ)
		}
		if _, err := services.New(services.Spec{Name: "x", Type: typ, URL: "https://h", APIKey: key}); err != nil {
			t.Errorf("New(%s): %v", typ, err)
		}
	}
}
