package services

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"modelgate/extproc/guard"
)

const armorTemplate = "projects/p/locations/us-central1/templates/t1"

// armorSpec is a Model Armor template at base whose service account's
// tokens tokenURL mints.
func armorSpec(t *testing.T, base, tokenURL string) Spec {
	return Spec{Name: "svc", Type: "model_armor", URL: base, Template: armorTemplate, ServiceAccount: googleServiceAccount(t, tokenURL)}
}

func TestModelArmor(t *testing.T) {
	g := startCloudGuards(t)
	svc := buildService(t, armorSpec(t, g.URL+"/guard", g.URL+"/token"))
	tests := []struct {
		name, text string
		phase      guard.Phase
		verb, data string
		flagged    bool
	}{
		{"clean prompt", "a harmless question", guard.Request, "sanitizeUserPrompt", "userPromptData", false},
		{"flagged prompt", "call zebra-42 now", guard.Request, "sanitizeUserPrompt", "userPromptData", true},
		{"clean response", "a harmless answer", guard.Response, "sanitizeModelResponse", "modelResponseData", false},
		{"flagged response", "héllo zebra-42", guard.Response, "sanitizeModelResponse", "modelResponseData", true},
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
			if r.URL.Path != "/guard/v1/"+armorTemplate+":"+tt.verb || r.Header.Get("Authorization") != "Bearer ya29.test-token" {
				t.Errorf("sent to %s with %q", r.URL.Path, r.Header.Get("Authorization"))
			}
			var sent map[string]struct{ Text string }
			if err := json.Unmarshal(body, &sent); err != nil || len(sent) != 1 || sent[tt.data].Text != tt.text {
				t.Errorf("sent %s", body)
			}
		})
	}
	if n := g.tokens.Load(); n != 1 {
		t.Errorf("%d tokens minted, want 1 for every check", n)
	}
}

func TestModelArmorFaults(t *testing.T) {
	g := startCloudGuards(t)
	testServiceFaults(t, func(fault string) guard.Service {
		return buildService(t, armorSpec(t, g.URL+"/guard/faults/"+fault, g.URL+"/token"))
	})
}

// A token endpoint refusing the grant, or a service refusing the token,
// fails the check.
func TestModelArmorBadCredentials(t *testing.T) {
	g := startCloudGuards(t)
	_, err := checkText(t, buildService(t, armorSpec(t, g.URL+"/guard", g.URL+"/token-denied")), guard.Request, "secret zebra-42")
	if err == nil || !strings.Contains(err.Error(), "token endpoint answered 400") || strings.Contains(err.Error(), "secret") {
		t.Errorf("error %v, want the token endpoint's status", err)
	}
	svc := buildService(t, armorSpec(t, g.URL+"/guard", g.URL+"/token")).(*modelArmor)
	if _, err := checkText(t, svc, guard.Request, "hello"); err != nil {
		t.Fatal(err)
	}
	svc.token.tok.AccessToken = "" // the kept token, lost
	_, err = checkText(t, svc, guard.Request, "secret zebra-42")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("error %v, want a 401", err)
	}
}

func TestModelArmorSpec(t *testing.T) {
	for name, tt := range map[string]struct {
		edit func(*Spec)
		want string
	}{
		"no template":              {func(s *Spec) { s.Template = "" }, "template"},
		"template without project": {func(s *Spec) { s.Template = "locations/l/templates/t" }, "template"},
		"template with a path":     {func(s *Spec) { s.Template = "projects/p/locations/l/templates/t/x" }, "template"},
		"location not a host part": {func(s *Spec) { s.Template = "projects/p/locations/evil.com#/templates/t" }, "template"},
		"no service account":       {func(s *Spec) { s.ServiceAccount = "" }, "service_account"},
		"not JSON":                 {func(s *Spec) { s.ServiceAccount = "{" }, "service_account"},
		"not a service account":    {func(s *Spec) { s.ServiceAccount = `{"type":"authorized_user"}` }, "service_account"},
		"no private key":           {func(s *Spec) { s.ServiceAccount = `{"type":"service_account","client_email":"a@b"}` }, "private_key"},
		"no client email":          {func(s *Spec) { s.ServiceAccount = `{"type":"service_account","private_key":"x"}` }, "client_email"},
		"not an http url":          {func(s *Spec) { s.URL = "modelarmor" }, "url"},
	} {
		t.Run(name, func(t *testing.T) {
			s := armorSpec(t, "", "https://oauth2.googleapis.com/token")
			tt.edit(&s)
			if _, err := New(s); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// Without a URL, the service is the template's regional endpoint.
func TestModelArmorEndpoint(t *testing.T) {
	s := armorSpec(t, "", "https://oauth2.googleapis.com/token")
	s.Template = "projects/my-project/locations/europe-west4/templates/strict"
	svc := buildService(t, s).(*modelArmor)
	const base = "https://modelarmor.europe-west4.rep.googleapis.com/v1/projects/my-project/locations/europe-west4/templates/strict"
	if svc.prompt.String() != base+":sanitizeUserPrompt" || svc.response.String() != base+":sanitizeModelResponse" {
		t.Errorf("endpoints %s, %s", svc.prompt, svc.response)
	}
}

func TestParseModelArmor(t *testing.T) {
	tests := []struct {
		name, body string
		want       guard.Verdict
		err        bool
	}{
		{"no match", `{"sanitizationResult":{"filterMatchState":"NO_MATCH_FOUND","invocationResult":"SUCCESS"}}`, guard.Verdict{}, false},
		{"match", `{"sanitizationResult":{"filterMatchState":"MATCH_FOUND","filterResults":{"rai":{}},"invocationResult":"SUCCESS"}}`, guard.Verdict{Flagged: true}, false},
		{"match, some filters failed", `{"sanitizationResult":{"filterMatchState":"MATCH_FOUND","invocationResult":"PARTIAL"}}`, guard.Verdict{Flagged: true}, false},
		{"no match, some filters failed", `{"sanitizationResult":{"filterMatchState":"NO_MATCH_FOUND","invocationResult":"PARTIAL"}}`, guard.Verdict{}, true},
		{"no match, filters failed", `{"sanitizationResult":{"filterMatchState":"NO_MATCH_FOUND","invocationResult":"FAILURE"}}`, guard.Verdict{}, true},
		{"unspecified", `{"sanitizationResult":{"filterMatchState":"FILTER_MATCH_STATE_UNSPECIFIED"}}`, guard.Verdict{}, true},
		{"no state", `{"sanitizationResult":{"invocationResult":"SUCCESS"}}`, guard.Verdict{}, true},
		{"null state", `{"sanitizationResult":{"filterMatchState":null}}`, guard.Verdict{}, true},
		{"no result", `{}`, guard.Verdict{}, true},
		{"null result", `{"sanitizationResult":null}`, guard.Verdict{}, true},
		{"null", `null`, guard.Verdict{}, true},
		{"malformed", `{"sanitizationResult":`, guard.Verdict{}, true},
		{"an array", `[]`, guard.Verdict{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseModelArmor("svc", []byte(tt.body))
			if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parse = %+v, %v; want %+v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}
