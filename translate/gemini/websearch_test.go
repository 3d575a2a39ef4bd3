package gemini

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

// groundedAnswer is a response grounded with Google Search, as Gemini's
// grounding documentation shows one (no recording exists): the segment
// offsets are bytes of the text, which has a multi-byte character before
// the second segment.
const groundedAnswer = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Spain won Euro 2024 — beating England 2-1. Spain has four titles."}]},"finishReason":"STOP",` +
	`"groundingMetadata":{"webSearchQueries":["UEFA Euro 2024 winner"],` +
	`"groundingChunks":[{"web":{"uri":"https://vertexaisearch.cloud.google.com/grounding-api-redirect/a","title":"aljazeera.com"}},{"web":{"uri":"https://vertexaisearch.cloud.google.com/grounding-api-redirect/b","title":"uefa.com"}}],` +
	`"groundingSupports":[{"segment":{"startIndex":0,"endIndex":44,"text":"Spain won Euro 2024 — beating England 2-1."},"groundingChunkIndices":[0,1]},` +
	`{"segment":{"startIndex":45,"endIndex":67,"text":"Spain has four titles."},"groundingChunkIndices":[1,7]}]}}],` +
	`"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":20,"totalTokenCount":32},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`

// web_search_options turns Google Search grounding on where the operator
// allows it; grounding supports become url_citation annotations over the
// code points of the content (an index to no web page is left out).
func TestWebSearch(t *testing.T) {
	req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"Who won Euro 2024?"}],"web_search_options":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := NewChat(translate.Target{Provider: "gemini", Model: "gemini-2.5-flash", WebSearch: true}, req)
	up, err := c.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(up.Body), `"tools":[{"googleSearch":{}}]`) {
		t.Errorf("request %s", up.Body)
	}
	c.ResponseHeaders(200, "application/json")
	out, err := c.ResponseBody([]byte(groundedAnswer), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	var cc struct {
		Choices []struct{ Message api.Message }
	}
	json.Unmarshal(out, &cc)
	msg := cc.Choices[0].Message
	content := []rune(*msg.Content)
	var got []string
	for _, a := range msg.Annotations {
		got = append(got, a.URLCitation.Title+": "+string(content[a.URLCitation.StartIndex:a.URLCitation.EndIndex]))
	}
	want := []string{"aljazeera.com: Spain won Euro 2024 — beating England 2-1.", "uefa.com: Spain won Euro 2024 — beating England 2-1.", "uefa.com: Spain has four titles."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("annotations %q, want %q", got, want)
	}

	c = NewChat(translate.Target{Provider: "gemini", Model: "gemini-2.5-flash"}, req)
	up, _ = c.RequestBody()
	if strings.Contains(string(up.Body), "googleSearch") {
		t.Errorf("search off: request %s", up.Body)
	}
}

// The searches of a grounded answer are its usage's web searches as
// Google bills them: Gemini 3 per unique, non-empty query of any
// candidate or event, Gemini 2.5 and older one per grounded prompt; the
// model that answered (modelVersion) decides, else the one asked for.
func TestWebSearchesBilled(t *testing.T) {
	grounded := func(version string, queries ...string) string {
		q, _ := json.Marshal(queries)
		return `{"candidates":[{"content":{"role":"model","parts":[{"text":"Spain."}]},"finishReason":"STOP",` +
			`"groundingMetadata":{"webSearchQueries":` + string(q) + `}}],` +
			`"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":2,"totalTokenCount":14},"modelVersion":"` + version + `"}`
	}
	plain := `{"candidates":[{"content":{"role":"model","parts":[{"text":"Spain."}]},"finishReason":"STOP"}],` +
		`"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":2,"totalTokenCount":14},"modelVersion":"gemini-3-pro-preview"}`
	for _, c := range []struct {
		name, model, body string
		want              int64
	}{
		{"gemini 3, per query", "gemini-3-pro-preview", grounded("gemini-3-pro-preview", "euro 2024 winner", "", "euro 2024 final score", "euro 2024 winner"), 2},
		{"gemini 3.1", "gemini-3.1-flash-lite", grounded("gemini-3.1-flash-lite", "a", "b", "c"), 3},
		{"gemini 2.5, per prompt", "gemini-2.5-flash", grounded("gemini-2.5-flash", "a", "b", "c"), 1},
		{"an alias, told by the version", "gemini-flash-latest", grounded("gemini-2.5-flash", "a", "b"), 1},
		{"no version, told by the model", "gemini-2.0-flash", grounded("", "a", "b"), 1},
		{"unknown generation, per query", "gemini-flash-latest", grounded("", "a", "b"), 2},
		{"only empty queries", "gemini-3-pro-preview", grounded("gemini-3-pro-preview", ""), 0},
		{"no grounding", "gemini-3-pro-preview", plain, 0},
	} {
		req, err := api.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"Euro 2024?"}],"web_search_options":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		tr := NewChat(translate.Target{Provider: "gemini", Model: c.model, WebSearch: true}, req)
		tr.ResponseHeaders(200, "application/json")
		if _, err := tr.ResponseBody([]byte(c.body), true); err != nil {
			t.Fatal(err)
		}
		if got := tr.Usage(); got.WebSearchRequests != c.want || got.PromptTokens != 12 {
			t.Errorf("%s: usage %+v, want %d web searches", c.name, got, c.want)
		}
	}
}

// In a stream the queries of every event count once each; the event with
// grounding (read by encoding/json, not the fast path) keeps its text.
func TestWebSearchesBilledStream(t *testing.T) {
	req, err := api.ParseChatRequest([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"Euro 2024?"}],"web_search_options":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	tr := NewChat(translate.Target{Provider: "gemini", Model: "gemini-3-flash-preview", WebSearch: true}, req)
	tr.ResponseHeaders(200, "text/event-stream")
	events := []string{
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"Spain "}]},"groundingMetadata":{"webSearchQueries":["euro 2024 winner"]}}],"modelVersion":"gemini-3-flash-preview","responseId":"r"}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"won."}]},"finishReason":"STOP","groundingMetadata":{"webSearchQueries":["euro 2024 winner","","euro 2024 final"]}}],` +
			`"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":2,"totalTokenCount":14},"modelVersion":"gemini-3-flash-preview","responseId":"r"}`,
	}
	var sse strings.Builder
	for _, e := range events {
		sse.WriteString("data: " + e + "\r\n\r\n")
	}
	out, err := tr.ResponseBody([]byte(sse.String()), true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"content":"Spain "`) || !strings.Contains(string(out), `"content":"won."`) {
		t.Errorf("stream:\n%s", out)
	}
	if got := tr.Usage(); got.WebSearchRequests != 2 || got.PromptTokens != 12 {
		t.Errorf("usage %+v, want 2 web searches", got)
	}
}
