package bedrock

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

// Bedrock's inputTokens are only the tokens after the last cache point:
// prompt_tokens adds the cache reads and writes, so the total agrees with
// Bedrock's totalTokens, and the reads are the cached tokens; in a stream
// as in JSON. (Usage as Converse documents it; no recording has a cache
// write.)
func TestCacheTokensInPrompt(t *testing.T) {
	const usage = `{"inputTokens":10,"outputTokens":5,"totalTokens":1515,"cacheReadInputTokens":1000,"cacheWriteInputTokens":500}`
	c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`)
	c.RequestBody() //nolint:errcheck // a valid request
	c.ResponseHeaders(200, "application/json")
	out, err := c.ResponseBody([]byte(`{"output":{"message":{"role":"assistant","content":[{"text":"Hello"}]}},"stopReason":"end_turn","usage":`+usage+`}`), true)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", out)
	const want = `"usage":{"prompt_tokens":1510,"completion_tokens":5,"total_tokens":1515,"prompt_tokens_details":{"cached_tokens":1000`
	if !strings.Contains(string(out), want) {
		t.Errorf("JSON usage: %s, want %s", out, want)
	}
	if u := c.Usage(); u.PromptTokens != 1510 || u.CachedTokens != 1000 || u.TotalTokens != 1515 {
		t.Errorf("recorded usage %+v", u)
	}

	s := newChat(t, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`)
	s.RequestBody() //nolint:errcheck // a valid request
	s.ResponseHeaders(200, "application/vnd.amazon.eventstream")
	var body []byte
	for _, f := range [][2]string{{"messageStart", `{"role":"assistant"}`}, {"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hello"}}`},
		{"contentBlockStop", `{"contentBlockIndex":0}`}, {"messageStop", `{"stopReason":"end_turn"}`}, {"metadata", `{"usage":` + usage + `,"metrics":{"latencyMs":1}}`}} {
		body = append(body, eventFrame(f[0], f[1])...)
	}
	out, err = s.ResponseBody(body, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"prompt_tokens":1510`) || s.Usage().PromptTokens != 1510 || s.Usage().CachedTokens != 1000 {
		t.Errorf("stream usage %+v:\n%s", s.Usage(), out)
	}
}

// With automatic caching on, a Claude request without markers gets cache
// points after the last tool, the system prompt and the last message; a
// model without caching gets none.
func TestAutoCachePoints(t *testing.T) {
	const body = `{"model":"m","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"Fix the build."}],
		"tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object"}}},{"type":"function","function":{"name":"shell","parameters":{"type":"object"}}}]}`
	for _, tc := range []struct {
		model string
		auto  bool
		want  int
	}{
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", true, 3},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", false, 0},
		{"meta.llama3-70b-instruct-v1:0", true, 0},
	} {
		req, err := api.ParseChatRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		up, err := NewChat(translate.Target{Provider: "bedrock", Model: tc.model, AutoCache: tc.auto}, req).RequestBody()
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			System     []map[string]any `json:"system"`
			ToolConfig struct {
				Tools []map[string]any `json:"tools"`
			} `json:"toolConfig"`
			Messages []struct {
				Content []map[string]any `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(up.Body, &r); err != nil {
			t.Fatal(err)
		}
		last := func(blocks []map[string]any) bool {
			return len(blocks) > 0 && blocks[len(blocks)-1]["cachePoint"] != nil
		}
		got := 0
		for _, blocks := range [][]map[string]any{r.System, r.ToolConfig.Tools, r.Messages[len(r.Messages)-1].Content} {
			if last(blocks) {
				got++
			}
		}
		if got != tc.want || strings.Count(string(up.Body), "cachePoint") != tc.want {
			t.Errorf("%s, automatic caching %v: %d cache points at the ends, %d in all; want %d:\n%s", tc.model, tc.auto, got,
				strings.Count(string(up.Body), "cachePoint"), tc.want, up.Body)
		}
	}
}
