package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

const recorded = "../../testdata/fixtures/gemini/"

func newChat(t testing.TB, body string) *chat {
	t.Helper()
	req, err := api.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatalf("ParseChatRequest: %v", err)
	}
	c := NewChat(translate.Target{Provider: "gemini", Model: "gemini-2.5-flash", APIKey: "g-key"}, req).(*chat)
	c.now = func() time.Time { return time.Unix(1700000000, 0) }
	return c
}

func TestRequestTranslation(t *testing.T) {
	c := newChat(t, `{"model":"m","max_completion_tokens":100,"temperature":0.3,"stop":["X"],"n":2,
		"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"}}},
		"messages":[
		{"role":"system","content":"Be brief."},
		{"role":"user","content":[{"type":"text","text":"Capital?"},{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/"}}]},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_capital","arguments":"{\"country\":\"France\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"Paris"}],
		"tools":[{"type":"function","function":{"name":"get_capital","parameters":{"type":"object","additionalProperties":false}}}],
		"tool_choice":{"type":"function","function":{"name":"get_capital"}}}`)
	up, err := c.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(up.Body, &got)
	want := map[string]any{
		"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "Be brief."}}},
		"contents": []any{
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "Capital?"},
				map[string]any{"inlineData": map[string]any{"mimeType": "image/jpeg", "data": "/9j/"}}}},
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "get_capital", "args": map[string]any{"country": "France"}}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "get_capital", "response": map[string]any{"result": "Paris"}}}}},
		},
		"tools": []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "get_capital",
			"parametersJsonSchema": map[string]any{"type": "object", "additionalProperties": false}}}}},
		"toolConfig": map[string]any{"functionCallingConfig": map[string]any{"mode": "ANY", "allowedFunctionNames": []any{"get_capital"}}},
		"generationConfig": map[string]any{"temperature": 0.3, "maxOutputTokens": 100.0, "stopSequences": []any{"X"}, "candidateCount": 2.0,
			"responseMimeType": "application/json", "responseJsonSchema": map[string]any{"type": "object"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream body (-want +got):\n%s", diff)
	}
	if up.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || up.Headers[1].Name != "x-goog-api-key" {
		t.Errorf("path %q headers %v", up.Path, up.Headers)
	}
	s, _ := newChat(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`).RequestBody()
	if s.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" {
		t.Errorf("stream path = %q", s.Path)
	}
}

func TestRequestRejections(t *testing.T) {
	for name, body := range map[string]string{
		"http image":        `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`,
		"unknown tool id":   `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"r"}]}`,
		"only system":       `{"model":"m","messages":[{"role":"system","content":"x"}]}`,
		"bad effort":        `{"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":"max"}`,
		"bad tool choice":   `{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"often"}`,
		"non-function tool": `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newChat(t, body).RequestBody()
			var re *api.RequestError
			if !errors.As(err, &re) {
				t.Errorf("error = %v, want a *api.RequestError", err)
			}
		})
	}
}

func TestRecordedResponses(t *testing.T) {
	files, _ := filepath.Glob(recorded + "*.bodies/*.meta.json")
	vertex, _ := filepath.Glob(recorded + "vertex/*.bodies/*.meta.json")
	files = append(files, vertex...)
	tested := 0
	for _, meta := range files {
		var m struct {
			URL          string `json:"url"`
			Status       int    `json:"status"`
			ContentType  string `json:"response_content_type"`
			ResponseFile string `json:"response_file"`
		}
		json.Unmarshal(translatetest.ReadFile(t, meta), &m)
		if m.Status != 200 || !strings.Contains(m.URL, "enerateContent") {
			continue
		}
		tested++
		t.Run(strings.TrimPrefix(meta, recorded), func(t *testing.T) {
			body := translatetest.ReadFile(t, filepath.Join(filepath.Dir(meta), m.ResponseFile))
			if strings.HasPrefix(m.ContentType, "text/event-stream") {
				out, usage := runStream(t, streamReq, [][]byte{body})
				spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
				if !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) || usage.TotalTokens == 0 {
					t.Errorf("usage %+v, tail %q", usage, out[max(0, len(out)-200):])
				}
				return
			}
			c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
			c.ResponseHeaders(200, m.ContentType)
			out, err := c.ResponseBody(body, true)
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "CreateChatCompletionResponse", out)
			if c.Usage().TotalTokens == 0 {
				t.Error("no usage")
			}
		})
	}
	if tested < 5 {
		t.Errorf("tested %d recordings, want the Gemini and Vertex ones", tested)
	}
}

func TestRecordedTextAndUsage(t *testing.T) {
	c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	c.ResponseHeaders(200, "application/json")
	out, _ := c.ResponseBody(translatetest.ReadFile(t, recorded+"test_google_model.bodies/00.response.json"), true)
	if !bytes.Contains(out, []byte(`"content":"Hello! How can I help you today?"`)) || !bytes.Contains(out, []byte(`"finish_reason":"stop"`)) {
		t.Errorf("output %s", out)
	}
	if want := (translate.Usage{PromptTokens: 9, CompletionTokens: 43, TotalTokens: 52, ReasoningTokens: 34}); c.Usage() != want {
		t.Errorf("usage = %+v, want %+v", c.Usage(), want)
	}
	out, _ = runStream(t, streamReq, [][]byte{translatetest.ReadFile(t, recorded+"test_google_model_iter_stream.bodies/00.response.sse")})
	if !bytes.Contains(out, []byte(`"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"get_capital","arguments":"{\"country\":\"France\"}"}}]`)) ||
		!bytes.Contains(out, []byte(`"finish_reason":"tool_calls"`)) {
		t.Errorf("stream output %s", out)
	}
}

func TestErrors(t *testing.T) {
	c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	head := c.ResponseHeaders(404, "application/json")
	out, _ := c.ResponseBody(translatetest.ReadFile(t, recorded+"TestGoogle.test_embed_error.bodies/00.response.json"), true)
	spec.ValidateT(t, "ErrorResponse", out)
	if head.Status != 404 || !bytes.Contains(out, []byte(`"code":"not_found"`)) {
		t.Errorf("%d %s", head.Status, out)
	}
	c = newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	head = c.ResponseHeaders(403, "application/json")
	out, _ = c.ResponseBody([]byte(`{"error":{"code":403,"message":"API key g-key not valid","status":"PERMISSION_DENIED"}}`), true)
	if head.Status != 502 || bytes.Contains(out, []byte("g-key")) {
		t.Errorf("%d %s", head.Status, out)
	}
	for name, up := range map[string]string{"cut": "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hi\"}]}}]}\r\n\r\n", "error": "data: {\"error\":{\"code\":500,\"message\":\"x\",\"status\":\"INTERNAL\"}}\n\n"} {
		out, _ := runStream(t, streamReq, [][]byte{[]byte(up)})
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
		events := strings.Split(strings.TrimSpace(string(out)), "\n\n")
		if !strings.HasPrefix(events[len(events)-1], `data: {"error":{`) {
			t.Errorf("%s: %q, want an error event last", name, out)
		}
	}
}

const streamReq = `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}`

func runStream(t testing.TB, body string, chunks [][]byte) ([]byte, translate.Usage) {
	t.Helper()
	c := newChat(t, body)
	c.ResponseHeaders(200, "text/event-stream")
	var out []byte
	for _, ch := range chunks {
		b, _ := c.ResponseBody(ch, false)
		out = append(out, b...)
	}
	b, _ := c.ResponseBody(nil, true)
	return append(out, b...), c.Usage()
}

// Gemini separates events with \r\n\r\n; any split gives the same output.
func TestStreamAnySplit(t *testing.T) {
	up := translatetest.ReadFile(t, recorded+"test_google_model_stream.bodies/00.response.sse")
	whole, _ := runStream(t, streamReq, [][]byte{up})
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		if got, _ := runStream(t, streamReq, translatetest.RandomChunks(r, up, 50)); !bytes.Equal(whole, got) {
			t.Fatal("split output differs")
		}
	}
}

func FuzzStreamSplit(f *testing.F) {
	f.Add(translatetest.ReadFile(f, recorded+"test_google_model_stream.bodies/00.response.sse"), uint64(1))
	f.Add([]byte("data: {\"error\":{}}\r\n\r"), uint64(2))
	f.Fuzz(func(t *testing.T, up []byte, seed uint64) {
		whole, _ := runStream(t, streamReq, [][]byte{up})
		got, _ := runStream(t, streamReq, translatetest.RandomChunks(rand.New(rand.NewPCG(seed, seed)), up, 50))
		if !bytes.Equal(whole, got) {
			t.Fatalf("split output differs\nwhole %q\nsplit %q", whole, got)
		}
	})
}

func BenchmarkStreamChunk(b *testing.B) {
	ev := []byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" the sky\"}],\"role\": \"model\"}}],\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"r1\"}\r\n\r\n")
	c := newChat(b, streamReq)
	c.ResponseHeaders(200, "text/event-stream")
	b.ReportAllocs()
	for b.Loop() {
		if out, _ := c.ResponseBody(ev, false); len(out) == 0 {
			b.Fatal("no output")
		}
	}
}

// Gemini 3's thought signature survives the round trip through an OpenAI
// client inside the tool call id.
func TestThoughtSignatureRoundTrip(t *testing.T) {
	up := translatetest.ReadFile(t, recorded+"test_google_streaming_tool_call_thought_signature.bodies/00.response.sse")
	var want string
	for _, line := range strings.Split(string(up), "\n") {
		if i := strings.Index(line, `"thoughtSignature": "`); i >= 0 {
			want, _, _ = strings.Cut(line[i+len(`"thoughtSignature": "`):], `"`)
			break
		}
	}
	out, _ := runStream(t, streamReq, [][]byte{up})
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
	i := bytes.Index(out, []byte(`"id":"gts_`))
	if want == "" || i < 0 {
		t.Fatalf("no signature-carrying tool call id in %s", out[:min(len(out), 400)])
	}
	id, _, _ := strings.Cut(string(out[i+len(`"id":"`):]), `"`)
	next := newChat(t, `{"model":"m","messages":[{"role":"user","content":"x"},
		{"role":"assistant","tool_calls":[{"id":"`+id+`","type":"function","function":{"name":"get_country","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"`+id+`","content":"France"}]}`)
	req, err := next.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Contents []struct {
			Parts []struct {
				ThoughtSignature string `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"contents"`
	}
	json.Unmarshal(req.Body, &body)
	if got := body.Contents[1].Parts[0].ThoughtSignature; got != want {
		t.Errorf("thoughtSignature sent back = %.40q…, want %.40q…", got, want)
	}
}
