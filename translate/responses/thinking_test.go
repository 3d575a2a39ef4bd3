package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/api/spec"
)

const weatherTool = `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`

// claudeTurn is Claude's answer after thinking: signed thinking, then a
// call of get_weather, as the Messages API documents tool use with
// extended thinking; n numbers the turn.
func claudeTurn(n string) string {
	return `{"id":"msg_` + n + `","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
		`"content":[{"type":"thinking","thinking":"Turn ` + n + `: I need the weather.","signature":"sig-` + n + `"},` +
		`{"type":"tool_use","id":"toolu_` + n + `","name":"get_weather","input":{"city":"Paris"}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":40}}`
}

// claudeTurnStream is claudeTurn streamed.
func claudeTurnStream(n string) string {
	return strings.Join([]string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_` + n + `","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":100,"output_tokens":1}}}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Turn ` + n + `: I need "}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"the weather."}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig-` + n + `"}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_` + n + `","name":"get_weather","input":{}}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":1}`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	}, "\n\n") + "\n\n"
}

// A three-turn tool loop with reasoning on Claude through the Responses
// bridge, stateless as Codex runs it (store: false, the items sent back):
// each turn's thinking reaches the client as a reasoning item's
// encrypted_content and reaches Claude again, signed and first, in the
// assistant turn the next request continues. Claude refuses the turn
// otherwise ("Expected thinking ... found tool_use").
func TestThinkingRoundTripsThroughTheBridge(t *testing.T) {
	for _, stream := range []bool{false, true} {
		input := []json.RawMessage{json.RawMessage(`{"role":"user","content":"Weather in Paris, three times?"}`)}
		for _, n := range []string{"1", "2", "3"} {
			in, _ := json.Marshal(input)
			r, err := ParseRequest([]byte(`{"model":"m","store":false,"include":["reasoning.encrypted_content"],"reasoning":{"effort":"low"},` +
				`"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,` + weatherTool + `,"input":` + string(in) + `}`))
			if err != nil {
				t.Fatal(err)
			}
			req, err := ToChat(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			tr := NewTranslator(anthropic.NewChat(translate.Target{Model: "claude-sonnet-4-5"}, req), r, nil, "resp_"+n, 1700000000)
			up, err := tr.RequestBody()
			if err != nil {
				t.Fatal(err)
			}
			checkThinkingSent(t, up.Body, n)
			if stream {
				tr.ResponseHeaders(200, "text/event-stream")
				var events []byte
				for _, c := range strings.SplitAfter(claudeTurnStream(n), "\n\n") {
					b, _ := tr.ResponseBody([]byte(c), false)
					events = append(events, b...)
				}
				end, _ := tr.ResponseBody(nil, true)
				checkEvents(t, append(events, end...))
			} else {
				tr.ResponseHeaders(200, "application/json")
				out, err := tr.ResponseBody([]byte(claudeTurn(n)), true)
				if err != nil {
					t.Fatal(err)
				}
				spec.ValidateT(t, "Response", out)
			}
			conv := tr.Conversation()
			output := conv[len(input):]
			if len(output) != 2 || !strings.Contains(string(output[0]), `"encrypted_content":"`+thinkingPrefix) {
				t.Fatalf("stream %v, turn %s: output %s", stream, n, output)
			}
			input = append(conv, json.RawMessage(`{"type":"function_call_output","call_id":"toolu_`+n+`","output":"18C"}`))
		}
	}
}

// checkThinkingSent checks that the request of turn n sends Claude every
// earlier turn's thinking, signed, first in its assistant turn, with
// thinking on.
func checkThinkingSent(t *testing.T, body []byte, n string) {
	t.Helper()
	var sent struct {
		Thinking *struct{ Type string }
		Messages []struct {
			Role    string
			Content []struct{ Type, Thinking, Signature string }
		}
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Thinking == nil {
		t.Fatalf("turn %s: thinking off: %s", n, body)
	}
	turns := 0
	for _, m := range sent.Messages {
		if m.Role != "assistant" {
			continue
		}
		turns++
		want := string(rune('0' + turns))
		if len(m.Content) < 2 || m.Content[0].Type != "thinking" || m.Content[0].Signature != "sig-"+want ||
			m.Content[0].Thinking != "Turn "+want+": I need the weather." || m.Content[1].Type != "tool_use" {
			t.Errorf("turn %s: assistant turn %d sent as %+v", n, turns, m.Content)
		}
	}
	if want := int(n[0] - '1'); turns != want {
		t.Errorf("turn %s: %d assistant turns, want %d", n, turns, want)
	}
}
