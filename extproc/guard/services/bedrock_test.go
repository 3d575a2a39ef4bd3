package services

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"modelgate/cmd/mockprovider/guards"
	"modelgate/extproc/guard"
)

// bedrockSpec is a Bedrock guardrail at base with the emulator's
// credentials.
func bedrockSpec(base string) Spec {
	return Spec{Name: "svc", Type: "bedrock_guardrail", URL: base, GuardrailID: "gr1", GuardrailVersion: "1", Region: "us-west-2",
		AWSAccessKeyID: guards.AWSAccessKeyID, AWSSecretAccessKey: guards.AWSSecretAccessKey}
}

func TestBedrockGuardrail(t *testing.T) {
	g := startCloudGuards(t)
	svc := buildService(t, bedrockSpec(g.URL+"/guard"))
	tests := []struct {
		name, text string
		phase      guard.Phase
		source     string
		want       guard.Verdict
	}{
		{"clean", "a harmless question", guard.Request, "INPUT", guard.Verdict{}},
		{"flagged", "call zebra-42 now", guard.Request, "INPUT", guard.Verdict{Flagged: true, Spans: [][2]int{{5, 13}}}},
		{"flagged after non-ASCII", "héllo 世界 zebra-42!", guard.Response, "OUTPUT", guard.Verdict{Flagged: true, Spans: [][2]int{{14, 22}}}},
		{"every occurrence", "zebra-42 and zebra-42", guard.Request, "INPUT", guard.Verdict{Flagged: true, Spans: [][2]int{{0, 8}, {13, 21}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkText(t, svc, tt.phase, tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("verdict %+v, want %+v", got, tt.want)
			}
			for _, s := range got.Spans {
				if tt.text[s[0]:s[1]] != "zebra-42" {
					t.Errorf("span %v is %q", s, tt.text[s[0]:s[1]])
				}
			}
			_, body := g.request()
			var sent struct {
				Source  string `json:"source"`
				Content []struct {
					Text struct{ Text string } `json:"text"`
				} `json:"content"`
			}
			if err := json.Unmarshal(body, &sent); err != nil || sent.Source != tt.source || len(sent.Content) != 1 || sent.Content[0].Text.Text != tt.text {
				t.Errorf("sent %s", body)
			}
		})
	}
}

// The request is signed with SigV4 for service bedrock in the
// configured region, at the spec's clock.
func TestBedrockSignsForRegion(t *testing.T) {
	g := startCloudGuards(t)
	s := bedrockSpec(g.URL + "/guard")
	s.Region, s.AWSSessionToken = "eu-central-1", "session/token+"
	s.Now = func() time.Time { return time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC) }
	if _, err := checkText(t, buildService(t, s), guard.Request, "hello"); err != nil {
		t.Fatal(err)
	}
	r, _ := g.request()
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+guards.AWSAccessKeyID+"/20260304/eu-central-1/bedrock/aws4_request, ") {
		t.Errorf("Authorization = %q", auth)
	}
	if r.Header.Get("X-Amz-Date") != "20260304T050607Z" || r.Header.Get("X-Amz-Security-Token") != "session/token+" {
		t.Errorf("headers %v", r.Header)
	}
	if r.URL.Path != "/guard/guardrail/gr1/version/1/apply" {
		t.Errorf("path %s", r.URL.Path)
	}
}

func TestBedrockFaults(t *testing.T) {
	g := startCloudGuards(t)
	testServiceFaults(t, func(fault string) guard.Service { return buildService(t, bedrockSpec(g.URL+"/guard/faults/"+fault)) })
}

func TestBedrockBadCredentials(t *testing.T) {
	g := startCloudGuards(t)
	for name, edit := range map[string]func(*Spec){
		"wrong secret": func(s *Spec) { s.AWSSecretAccessKey = "not-the-secret" },
		"unknown key":  func(s *Spec) { s.AWSAccessKeyID = "AKIDUNKNOWN" },
	} {
		t.Run(name, func(t *testing.T) {
			s := bedrockSpec(g.URL + "/guard")
			edit(&s)
			_, err := checkText(t, buildService(t, s), guard.Request, "secret zebra-42")
			if err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "secret") {
				t.Errorf("error %v, want a 403 naming no secret", err)
			}
		})
	}
}

func TestBedrockSpec(t *testing.T) {
	for name, tt := range map[string]struct {
		edit func(*Spec)
		want string
	}{
		"no id":           {func(s *Spec) { s.GuardrailID = "" }, "guardrail_id"},
		"bad id":          {func(s *Spec) { s.GuardrailID = "gr/../x" }, "guardrail_id"},
		"no version":      {func(s *Spec) { s.GuardrailVersion = "" }, "guardrail_version"},
		"bad version":     {func(s *Spec) { s.GuardrailVersion = "latest" }, "guardrail_version"},
		"no region":       {func(s *Spec) { s.Region = "" }, "region"},
		"bad region":      {func(s *Spec) { s.Region = "evil.com/x" }, "region"},
		"no key id":       {func(s *Spec) { s.AWSAccessKeyID = "" }, "credentials"},
		"no secret":       {func(s *Spec) { s.AWSSecretAccessKey = "" }, "credentials"},
		"not an http url": {func(s *Spec) { s.URL = "ftp://host" }, "url"},
	} {
		t.Run(name, func(t *testing.T) {
			s := bedrockSpec("")
			tt.edit(&s)
			if _, err := New(s); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// Without a URL, the service is the region's endpoint; an ARN is escaped.
func TestBedrockEndpoint(t *testing.T) {
	s := bedrockSpec("")
	s.GuardrailID, s.GuardrailVersion = "arn:aws:bedrock:us-west-2:123456789012:guardrail/gr1", "DRAFT"
	svc := buildService(t, s).(*bedrockGuardrail)
	want := "https://bedrock-runtime.us-west-2.amazonaws.com/guardrail/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Aguardrail%2Fgr1/version/DRAFT/apply"
	if got := svc.endpoint.String(); got != want {
		t.Errorf("endpoint %s\nwant %s", got, want)
	}
}

func TestParseBedrock(t *testing.T) {
	const text = "my card 4111 and zebra-1, zebra-1"
	tests := []struct {
		name, body string
		want       guard.Verdict
		err        bool
	}{
		{"none", `{"action":"NONE","outputs":[],"assessments":[]}`, guard.Verdict{}, false},
		{"intervened without matches", `{"action":"GUARDRAIL_INTERVENED","assessments":[{"contentPolicy":{"filters":[{"type":"HATE","action":"BLOCKED"}]}}]}`,
			guard.Verdict{Flagged: true}, false},
		{"every policy's matches", `{"action":"GUARDRAIL_INTERVENED","assessments":[null,{"sensitiveInformationPolicy":{"piiEntities":[{"match":"4111","type":"CREDIT_DEBIT_CARD_NUMBER","action":"ANONYMIZED"}]}},
			{"wordPolicy":{"customWords":[{"match":"zebra-1","action":"BLOCKED"}],"managedWordLists":[{"match":"card","type":"PROFANITY","action":"BLOCKED"}]}}]}`,
			guard.Verdict{Flagged: true, Spans: [][2]int{{3, 7}, {8, 12}, {17, 24}, {26, 33}}}, false},
		{"overlapping matches merge", `{"action":"GUARDRAIL_INTERVENED","assessments":[{"sensitiveInformationPolicy":{"regexes":[{"name":"a","match":"card 4111","action":"BLOCKED"},{"name":"b","match":"4111 and","action":"BLOCKED"}]}}]}`,
			guard.Verdict{Flagged: true, Spans: [][2]int{{3, 16}}}, false},
		{"detected only", `{"action":"GUARDRAIL_INTERVENED","assessments":[{"sensitiveInformationPolicy":{"regexes":[{"name":"a","match":"4111","action":"NONE"}]}}]}`,
			guard.Verdict{Flagged: true}, false},
		{"match not in the text", `{"action":"GUARDRAIL_INTERVENED","assessments":[{"wordPolicy":{"customWords":[{"match":"absent","action":"BLOCKED"}]}}]}`,
			guard.Verdict{Flagged: true}, false},
		{"null", `null`, guard.Verdict{}, true},
		{"no action", `{"outputs":[]}`, guard.Verdict{}, true},
		{"null action", `{"action":null}`, guard.Verdict{}, true},
		{"unknown action", `{"action":"MAYBE"}`, guard.Verdict{}, true},
		{"malformed", `{"action":`, guard.Verdict{}, true},
		{"wrong type", `{"action":"NONE","assessments":{}}`, guard.Verdict{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseBedrock("svc", []byte(tt.body), text)
			if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parse = %+v, %v; want %+v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}
