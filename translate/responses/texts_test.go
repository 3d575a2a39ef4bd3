package responses

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
)

// A Responses request's text is found by part, in order; tool calls'
// arguments, reasoning and images are not text.
func TestTexts(t *testing.T) {
	for _, tt := range []struct {
		body string
		want []translate.RequestText
	}{
		{`{"model":"m","input":"hello"}`, []translate.RequestText{{Part: translate.PartUser, Text: "hello"}}},
		{`{"model":"m","instructions":"be brief","input":[
			{"role":"developer","content":"rules"},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]},
			{"type":"reasoning","summary":[{"type":"summary_text","text":"thought"}],"encrypted_content":"xyz"},
			{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"secret\":1}"},
			{"type":"function_call_output","call_id":"c1","output":"result"},
			{"role":"assistant","content":[{"type":"output_text","text":"earlier answer"}]},
			{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"input_text","text":"patched"}]}]}`,
			[]translate.RequestText{
				{Part: translate.PartSystem, Text: "be brief"},
				{Part: translate.PartSystem, Text: "rules"},
				{Part: translate.PartUser, Text: "look"},
				{Part: translate.PartToolResult, Text: "result"},
				{Part: translate.PartAssistant, Text: "earlier answer"},
				{Part: translate.PartToolResult, Text: "patched"},
			}},
	} {
		r, err := ParseRequest([]byte(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tt.want, Texts(r)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.body, d)
		}
	}
}
