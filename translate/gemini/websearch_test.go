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
