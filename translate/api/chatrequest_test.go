package api

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
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
