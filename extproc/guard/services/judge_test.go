package services

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"modelgate/extproc/guard"
)

// judgeSpec is an LLM judge at the OpenAI base URL base.
func judgeSpec(base string) Spec {
	return Spec{Name: "svc", Type: "llm_judge", URL: base, APIKey: "sk-judge", Model: "llama-guard-3"}
}

func TestJudge(t *testing.T) {
	g := startCloudGuards(t)
	svc := buildService(t, judgeSpec(g.URL+"/guard/judge/v1"))
	tests := []struct {
		name, text string
		phase      guard.Phase
		role       string
		flagged    bool
	}{
		{"clean prompt", "a harmless question", guard.Request, "User", false},
		{"flagged prompt", "call zebra-42 now", guard.Request, "User", true},
		{"clean answer", "a harmless answer", guard.Response, "Agent", false},
		{"flagged answer", "héllo zebra-42", guard.Response, "Agent", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkText(t, svc, tt.phase, tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if got.Flagged != tt.flagged || got.Spans != nil {
				t.Errorf("verdict %+v, want flagged %v without spans", got, tt.flagged)
			}
			r, body := g.request()
			var sent struct {
				Model       string
				Messages    []struct{ Role, Content string }
				MaxTokens   *int     `json:"max_tokens"`
				Temperature *float64 `json:"temperature"`
			}
			if err := json.Unmarshal(body, &sent); err != nil || sent.Model != "llama-guard-3" || len(sent.Messages) != 1 || sent.Messages[0].Role != "user" ||
				sent.MaxTokens == nil || *sent.MaxTokens != 20 || sent.Temperature == nil || *sent.Temperature != 0 {
				t.Fatalf("sent %s", body)
			}
			prompt := sent.Messages[0].Content
			for _, want := range []string{"unsafe content in '" + tt.role + "' messages", "S14: Code Interpreter Abuse.",
				"<BEGIN CONVERSATION>\n\n" + tt.role + ": " + tt.text + "\n\n<END CONVERSATION>", "ONLY THE LAST " + tt.role + " message"} {
				if !strings.Contains(prompt, want) {
					t.Errorf("the prompt has no %q:\n%s", want, prompt)
				}
			}
			if r.Header.Get("Authorization") != "Bearer sk-judge" {
				t.Errorf("Authorization = %q", r.Header.Get("Authorization"))
			}
		})
	}
}

func TestJudgeFaults(t *testing.T) {
	g := startCloudGuards(t)
	testServiceFaults(t, func(fault string) guard.Service {
		return buildService(t, judgeSpec(g.URL+"/guard/faults/"+fault+"/judge/v1"))
	})
}

// Without a key the judge's endpoint refuses the check.
func TestJudgeMissingKey(t *testing.T) {
	g := startCloudGuards(t)
	s := judgeSpec(g.URL + "/guard/judge/v1")
	s.APIKey = ""
	if _, err := checkText(t, buildService(t, s), guard.Request, "hello"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("error %v, want a 401", err)
	}
}

func TestJudgeSpec(t *testing.T) {
	for name, tt := range map[string]struct {
		edit func(*Spec)
		want string
	}{
		"no model":        {func(s *Spec) { s.Model = "" }, "model"},
		"no url":          {func(s *Spec) { s.URL = "" }, "url"},
		"not an http url": {func(s *Spec) { s.URL = "localhost:8080/v1" }, "url"},
	} {
		t.Run(name, func(t *testing.T) {
			s := judgeSpec("https://gateway.example/v1")
			tt.edit(&s)
			if _, err := New(s); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one naming %s", err, tt.want)
			}
		})
	}
}

func TestParseJudge(t *testing.T) {
	answer := func(content string) string {
		return `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":` + content + `},"finish_reason":"stop"}]}`
	}
	tests := []struct {
		name, body string
		want       guard.Verdict
		err        bool
	}{
		{"safe", answer(`"safe"`), guard.Verdict{}, false},
		{"safe, spaced", answer(`"\n safe \n"`), guard.Verdict{}, false},
		{"unsafe", answer(`"unsafe\nS1"`), guard.Verdict{Flagged: true}, false},
		{"unsafe, categories", answer(`"unsafe\nS1,S9, S14"`), guard.Verdict{Flagged: true}, false},
		{"unsafe, CRLF", answer(`"unsafe\r\nS10\r\n"`), guard.Verdict{Flagged: true}, false},
		{"unsafe without categories", answer(`"unsafe"`), guard.Verdict{}, true},
		{"unsafe, not categories", answer(`"unsafe\nviolence"`), guard.Verdict{}, true},
		{"safe with more", answer(`"safe\nS1"`), guard.Verdict{}, true},
		{"other words", answer(`"I cannot help with that."`), guard.Verdict{}, true},
		{"capitalized", answer(`"Safe"`), guard.Verdict{}, true},
		{"empty", answer(`""`), guard.Verdict{}, true},
		{"null content", answer(`null`), guard.Verdict{}, true},
		{"parts content", answer(`[{"type":"text","text":"safe"}]`), guard.Verdict{}, true},
		{"null message", `{"choices":[{"message":null}]}`, guard.Verdict{}, true},
		{"null choice", `{"choices":[null]}`, guard.Verdict{}, true},
		{"no choices", `{"choices":[]}`, guard.Verdict{}, true},
		{"null", `null`, guard.Verdict{}, true},
		{"malformed", `{"choices":[`, guard.Verdict{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseJudge("svc", []byte(tt.body))
			if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parse = %+v, %v; want %+v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// A model repeating what it judged does not put it in the error.
func TestParseJudgeErrorHidesTheAnswer(t *testing.T) {
	_, err := parseJudge("svc", []byte(`{"choices":[{"message":{"content":"secret zebra-42"}}]}`))
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), `"svc"`) {
		t.Errorf("error %v", err)
	}
}
