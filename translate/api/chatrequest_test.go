package api

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate/jsonscan"
)

func TestParseChatRequestErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name string
		body string
		want RequestError // Message is not compared
	}{
		{"not json", `{`, RequestError{}},
		{"not an object", `[1]`, RequestError{}},
		{"missing model", `{` + msgs + `}`, RequestError{Param: "model", Code: "missing_required_parameter"}},
		{"empty model", `{"model":"",` + msgs + `}`, RequestError{Param: "model", Code: "missing_required_parameter"}},
		{"model not a string", `{"model":4,` + msgs + `}`, RequestError{Param: "model", Code: "invalid_type"}},
		{"missing messages", `{"model":"m"}`, RequestError{Param: "messages", Code: "missing_required_parameter"}},
		{"messages not an array", `{"model":"m","messages":{}}`, RequestError{Param: "messages", Code: "invalid_type"}},
		{"empty messages", `{"model":"m","messages":[]}`, RequestError{Param: "messages", Code: "invalid_value"}},
		{"message not an object", `{"model":"m","messages":["hi"]}`, RequestError{Param: "messages[0]", Code: "invalid_type"}},
		{"message without role", `{"model":"m","messages":[{"content":"x"}]}`, RequestError{Param: "messages[0].role", Code: "missing_required_parameter"}},
		{"bad role", `{"model":"m","messages":[{"role":"user"},{"role":"robot"}]}`, RequestError{Param: "messages[1].role", Code: "invalid_value"}},
		{"temperature 3", `{"model":"m",` + msgs + `,"temperature":3}`, RequestError{Param: "temperature", Code: "invalid_value"}},
		{"temperature negative", `{"model":"m",` + msgs + `,"temperature":-0.1}`, RequestError{Param: "temperature", Code: "invalid_value"}},
		{"temperature string", `{"model":"m",` + msgs + `,"temperature":"hot"}`, RequestError{Param: "temperature", Code: "invalid_type"}},
		{"top_p 1.5", `{"model":"m",` + msgs + `,"top_p":1.5}`, RequestError{Param: "top_p", Code: "invalid_value"}},
		{"frequency_penalty -3", `{"model":"m",` + msgs + `,"frequency_penalty":-3}`, RequestError{Param: "frequency_penalty", Code: "invalid_value"}},
		{"presence_penalty 2.5", `{"model":"m",` + msgs + `,"presence_penalty":2.5}`, RequestError{Param: "presence_penalty", Code: "invalid_value"}},
		{"n 0", `{"model":"m",` + msgs + `,"n":0}`, RequestError{Param: "n", Code: "invalid_value"}},
		{"n fractional", `{"model":"m",` + msgs + `,"n":1.5}`, RequestError{Param: "n", Code: "invalid_type"}},
		{"max_tokens 0", `{"model":"m",` + msgs + `,"max_tokens":0}`, RequestError{Param: "max_tokens", Code: "invalid_value"}},
		{"max_completion_tokens string", `{"model":"m",` + msgs + `,"max_completion_tokens":"9"}`, RequestError{Param: "max_completion_tokens", Code: "invalid_type"}},
		{"stream not bool", `{"model":"m",` + msgs + `,"stream":"yes"}`, RequestError{Param: "stream", Code: "invalid_type"}},
		{"stream_options without stream", `{"model":"m",` + msgs + `,"stream_options":{"include_usage":true}}`, RequestError{Param: "stream_options", Code: "invalid_value"}},
		{"include_usage not bool", `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":1}}`, RequestError{Param: "stream_options.include_usage", Code: "invalid_type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseChatRequest([]byte(tt.body))
			var got *RequestError
			if !errors.As(err, &got) {
				t.Fatalf("ParseChatRequest(%s) error = %v, want *RequestError", tt.body, err)
			}
			if got.Message == "" {
				t.Errorf("error has no message")
			}
			if diff := cmp.Diff(tt.want, RequestError{Param: got.Param, Code: got.Code}); diff != "" {
				t.Errorf("ParseChatRequest(%s) (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

func TestParseChatRequestTemperatureMessage(t *testing.T) {
	_, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user"}],"temperature":3}`))
	want := "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead."
	if err == nil || err.(*RequestError).Message != want {
		t.Errorf("message = %v, want %q", err, want)
	}
}

func TestParseChatRequestValid(t *testing.T) {
	r, err := ParseChatRequest([]byte(`{"model":"gpt-4o","messages":[{"role":"developer","content":"x"}],
		"temperature":null,"stream":true,"stream_options":{"include_usage":true},"seed":7}`))
	if err != nil {
		t.Fatalf("ParseChatRequest: %v", err)
	}
	if r.Model != "gpt-4o" || !r.Stream || !r.IncludeUsage || string(r.Members["seed"]) != "7" {
		t.Errorf("parsed = %+v", r)
	}
}

func FuzzParseChatRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user"}],"stream":true,"stream_options":{}}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":1}],"n":1e400}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseChatRequest(body)
		if err == nil && r.Model == "" {
			t.Fatalf("accepted %q without a model", body)
		}
		var re *RequestError
		if err != nil && !errors.As(err, &re) {
			t.Fatalf("error %v is not a *RequestError", err)
		}
	})
}

// ModelAt and OptionsAt are the members of Body that carry model and
// stream_options, however their keys are written; without a Body (a key
// repeats) there is nothing to edit.
func TestParseChatRequestMemberPositions(t *testing.T) {
	tests := []struct {
		body             string
		model, options   string // the values at ModelAt and OptionsAt
		hasBody, hasOpts bool
	}{
		{body: `{"model":"gpt-4o","messages":[{"role":"user"}]}`, model: `"gpt-4o"`, hasBody: true},
		{body: ` { "stream_options" : { "include_usage" : false } , "stream":true, "mod\u0065l" : "m" ,"messages":[{"role":"user"}]} `,
			model: `"m"`, options: `{ "include_usage" : false }`, hasBody: true, hasOpts: true},
		{body: `{"model":"m","messages":[{"role":"user"}],"stream_options":null}`, model: `"m"`, options: `null`, hasBody: true, hasOpts: true},
		{body: `{"model":"a","model":"b","messages":[{"role":"user"}]}`},
	}
	for _, tt := range tests {
		r, err := ParseChatRequest([]byte(tt.body))
		if err != nil {
			t.Fatalf("ParseChatRequest(%s): %v", tt.body, err)
		}
		if (r.Body != nil) != tt.hasBody {
			t.Fatalf("ParseChatRequest(%s): Body %q", tt.body, r.Body)
		}
		if !tt.hasBody {
			continue
		}
		for _, at := range []struct {
			m    jsonscan.Member
			want string
			has  bool
		}{{r.ModelAt, tt.model, true}, {r.OptionsAt, tt.options, tt.hasOpts}} {
			if !at.has {
				if at.m.End != 0 {
					t.Errorf("ParseChatRequest(%s): a member %+v where there is none", tt.body, at.m)
				}
				continue
			}
			if got := tt.body[at.m.VS:at.m.End]; got != at.want || string(at.m.Value) != at.want {
				t.Errorf("ParseChatRequest(%s): member value %s (%s), want %s", tt.body, got, at.m.Value, at.want)
			}
		}
	}
}

// numberIn and integerIn take and refuse what encoding/json does, with
// the same errors, for any JSON value.
func FuzzNumberMembers(f *testing.F) {
	for _, s := range []string{`0.7`, `1`, `-0`, `2.5e-1`, `1e400`, `-1e400`, `1E2`, `9223372036854775807`, `9223372036854775808`,
		`-9223372036854775809`, `1.0`, `"1"`, `true`, `null`, `[]`, `{}`, `4e-400`, `0.1e1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			t.Skip()
		}
		m := map[string]json.RawMessage{"x": raw}
		var v float64
		want := error(nil)
		if !jsonscan.IsNull(raw) {
			if json.Unmarshal(raw, &v) != nil {
				want = wrongType("x", "a number", raw)
			} else {
				want = inRange("x", v, -2, 2, "decimal", raw)
			}
		}
		if got := numberIn(m, "x", -2, 2); !cmp.Equal(got, want) {
			t.Fatalf("numberIn(%s) = %v, want %v", raw, got, want)
		}
		var n int64
		want = nil
		if !jsonscan.IsNull(raw) {
			if json.Unmarshal(raw, &n) != nil {
				want = wrongType("x", "an integer", raw)
			} else {
				want = inRange("x", float64(n), 1, 1<<31, "integer", raw)
			}
		}
		if got := integerIn(m, "x", 1, 1<<31); !cmp.Equal(got, want) {
			t.Fatalf("integerIn(%s) = %v, want %v", raw, got, want)
		}
	})
}

// benchChatRequest is a chat request of about 620 bytes, as a client of a
// support bot sends it.
const benchChatRequest = `{"model":"gpt-4o","messages":[` +
	`{"role":"system","content":"You are the support assistant of an online bookshop. Answer briefly and politely; when you do not know something, say so and offer to open a ticket."},` +
	`{"role":"user","content":"Hello! I ordered \"The Left Hand of Darkness\" last week and the tracking page still says it has not shipped. My order number is 118-4432-0097. Can you tell me what is going on and when it will arrive? I need it for a reading group on Thursday."}],` +
	`"temperature":0.7,"top_p":1,"max_completion_tokens":256,"user":"customer-4432"}`

func BenchmarkParseChatRequest(b *testing.B) {
	for name, body := range map[string]string{
		"buffered": benchChatRequest,
		"stream":   benchChatRequest[:len(benchChatRequest)-1] + `,"stream":true,"stream_options":{"include_usage":true}}`,
	} {
		b.Run(name, func(b *testing.B) {
			body := []byte(body)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := ParseChatRequest(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
