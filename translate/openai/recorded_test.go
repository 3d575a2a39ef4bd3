package openai

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

// Every recorded successful chat response, OpenAI's and compatible
// servers', becomes schema-valid client output.
func TestRecordedResponsesBecomeValid(t *testing.T) {
	var files []string
	for _, dir := range []string{recorded + "chat", "../../testdata/fixtures/openai-compatible", "../../testdata/fixtures/azure", "../../testdata/fixtures/mistral"} {
		m, _ := filepath.Glob(dir + "/*.bodies/*.meta.json")
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found %d recordings", len(files))
	}
	for _, meta := range files {
		var m struct {
			URL          string `json:"url"`
			Status       int    `json:"status"`
			ContentType  string `json:"response_content_type"`
			ResponseFile string `json:"response_file"`
		}
		json.Unmarshal(translatetest.ReadFile(t, meta), &m)
		if m.Status != 200 || !strings.Contains(m.URL, "/chat/completions") {
			continue
		}
		quirks := CompatibleProviders()["openai-compatible"]
		if strings.Contains(meta, "mistral/") {
			quirks = CompatibleProviders()["mistral"]
		}
		t.Run(strings.TrimPrefix(meta, "../../testdata/fixtures/"), func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(filepath.Dir(meta), m.ResponseFile))
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(m.ContentType, "text/event-stream") {
				out, _ := runQuirkStream(t, quirks, streamReq+`,"stream_options":{"include_usage":true}}`, [][]byte{body})
				spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
				return
			}
			tr := newChat(t, `{"model":"m","messages":[{"role":"user"}]}`)
			tr.ResponseHeaders(200, m.ContentType)
			out, err := tr.ResponseBody(body, true)
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "CreateChatCompletionResponse", out)
		})
	}
}
