package messages

import (
	"testing"

	"modelgate/translate/api"
)

// FuzzToChat feeds client bodies through the Messages API's parser and
// the bridge's request mapping: an error or a chat request, never a
// panic.
func FuzzToChat(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`,
		`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}]}]},{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"s"},{"type":"tool_use","id":"t","name":"n","input":{}}]}],"tools":[{"name":"n","input_schema":{}}],"tool_choice":{"type":"any"},"thinking":{"type":"enabled","budget_tokens":2048}}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"system","content":[{"type":"document","source":{"type":"text","data":"d"}}]}],"output_config":{"format":{"type":"json_schema","schema":{}}}}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":null}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := api.ParseMessagesRequest(body, false)
		if err != nil {
			return
		}
		if chat, _, err := ToChat(r); err == nil && chat == nil {
			t.Fatal("no chat request and no error")
		}
	})
}
