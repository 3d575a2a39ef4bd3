package translate_test

import (
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// Requests of the right top-level shape whose members break a provider's
// view of them, with 1 MiB strings wherever a message might quote one.
// Every provider answers each with a clean client error (or takes it).
func TestRequestErrorMessagesAreBounded(t *testing.T) {
	big := strings.Repeat("B", 1<<20)
	user := `{"role":"user","content":"hi"}`
	bodies := []string{
		`{"model":"` + big + `","messages":[` + user + `],"user":5}`,
		`{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":"x"}]}`,
		`{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c","function":{"name":["f"],"arguments":"{}"}}]}]}`,
		`{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"` + big + `"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"` + big + `"}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":5}]}`,
		`{"model":"m","messages":[{"role":"system","content":[{"type":"` + big + `","text":"x"}]},` + user + `]}`,
		`{"model":"m","messages":[{"role":"function","content":"x","name":"` + big + `"},` + user + `]}`,
		`{"model":"m","messages":[` + user + `,{"role":"tool","tool_call_id":"` + big + `","content":"x"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + big + `"}}]}]}`,
		`{"model":"m","messages":[` + user + `],"tools":[{"type":"` + big + `","function":{"name":"f"}}]}`,
		`{"model":"m","messages":[` + user + `],"tools":{"a":1}}`,
		`{"model":"m","messages":[` + user + `],"tool_choice":"` + big + `"}`,
		`{"model":"m","messages":[` + user + `],"tool_choice":{"function":{"name":5}}}`,
		`{"model":"m","messages":[` + user + `],"reasoning_effort":"` + big + `"}`,
		`{"model":"m","messages":[` + user + `],"response_format":{"type":"` + big + `"}}`,
		`{"model":"m","messages":[` + user + `],"response_format":"json"}`,
		`{"model":"m","messages":[` + user + `],"stop":5}`,
		`{"model":"m","messages":[` + user + `],"seed":"x"}`,
	}
	for _, body := range bodies {
		req, err := api.ParseChatRequest([]byte(body))
		if err != nil {
			translatetest.CheckClientMessage(t, err, 1024)
			continue
		}
		for _, p := range providers() {
			target := translate.Target{Backend: "b", Provider: p.name, Model: p.model, APIKey: "k", Project: "p", Region: "us-east5"}
			if _, err := p.newFor(target, req).RequestBody(); err != nil {
				t.Run(p.name, func(t *testing.T) { translatetest.CheckClientMessage(t, err, 1024) })
			}
		}
	}
}
