package responses_test

import (
	"strings"
	"testing"

	"modelgate/translate/responses"
	"modelgate/translate/translatetest"
)

// Responses request errors quote client text bounded and never say what
// encoding/json or Go would.
func TestRequestErrorMessagesAreBounded(t *testing.T) {
	big := strings.Repeat("R", 1<<20)
	bigNumber := "1" + strings.Repeat("0", 1<<20)
	bodies := []string{
		big,
		`{"model":"` + big + `","input":5}`,
		`{"model":5,"input":"hi"}`,
		`{"model":"m","input":"hi","temperature":` + bigNumber + `}`,
		`{"model":"m","input":"hi","max_output_tokens":-` + bigNumber + `}`,
		`{"model":"m","input":"hi","top_p":"` + big + `"}`,
		`{"model":"m","input":"hi","truncation":"` + big + `"}`,
		`{"model":"m","input":"hi","stream":"` + big + `"}`,
		`{"model":"m","input":[{"type":"` + big + `"}]}`,
		`{"model":"m","input":[{"role":"` + big + `","content":"x"}]}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"` + big + `"}]}]}`,
		`{"model":"m","input":[{"role":"user","content":5}]}`,
		`{"model":"m","input":[5]}`,
		`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"` + big + `"}]}`,
		`{"model":"m","input":"hi","tools":[{"type":"` + big + `","name":"f"}]}`,
		`{"model":"m","input":"hi","tools":{"a":1}}`,
		`{"model":"m","input":"hi","tool_choice":{"type":"` + big + `"}}`,
	}
	for _, body := range bodies {
		req, err := responses.ParseRequest([]byte(body))
		if err == nil {
			_, err = responses.ToChat(req, nil)
		}
		if err != nil {
			translatetest.CheckClientMessage(t, err, 1024)
		}
	}
}
