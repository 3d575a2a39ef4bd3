package main

import (
	"encoding/json"
	"fmt"
	"modelgate/translate/translatetest/clienttext"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// guardServiceTypes are the guard services' contracts, the config of
// each beside its url (mock: the dev mock's emulator), and whether it
// says where it found what it flags (so a rule can mask with it).
var guardServiceTypes = []struct {
	typ, url, extra string
	spans           bool
}{
	{"presidio", "mock", "language: en", true},
	{"http", "mock/http/check", "api_key_env: UNUSED", true},
	{"openai_moderation", "mock", "api_key_env: UNUSED", false},
	{"lakera", "mock", "api_key_env: UNUSED", false},
	{"azure_content_safety", "mock", "api_key_env: UNUSED", false},
	{"azure_prompt_shields", "mock", "api_key_env: UNUSED", false},
	{"bedrock_guardrail", "mock", "guardrail_id: g1, guardrail_version: '1', region: us-east-1", true},
	{"model_armor", "mock", "template: projects/p/locations/us-central1/templates/t, service_account_env: UNUSED", false},
	{"llm_judge", "mock/judge/v1", "model: llama-guard, api_key_env: UNUSED", false},
}

// guardServicesConfig has, for each service type T, the service T (and
// T-500 failing, T-hang hanging) and models named T-block, T-mask,
// T-answer, T-open, T-closed and T-hang, each with one rule on it.
func guardServicesConfig(t *testing.T) string {
	var b strings.Builder
	b.WriteString("backends:\n  - {name: mock, provider: openai, base_url: \"http://unused\", api_key_env: UNUSED}\nmodels:\n")
	var services, rules, prices strings.Builder
	for _, s := range guardServiceTypes {
		for _, m := range []string{"block", "mask", "answer", "open", "closed", "hang", "answer-open", "answer-closed"} {
			fmt.Fprintf(&b, "  - {id: %s-%s, deployments: [{backend: mock, model: mock-agent}]}\n", s.typ, m)
		}
		for _, v := range []struct{ suffix, url, timeout string }{{"", s.url, "2s"}, {"-500", "mock/faults/500" + strings.TrimPrefix(s.url, "mock"), "2s"},
			{"-hang", "mock/faults/hang" + strings.TrimPrefix(s.url, "mock"), "300ms"}} {
			fmt.Fprintf(&services, "    - {name: %s%s, type: %s, url: %q, timeout: %s, price_per_call: \"0.001\", %s}\n", s.typ, v.suffix, s.typ, v.url, v.timeout, s.extra)
		}
		fmt.Fprintf(&prices, "    - {model: %s-block, input: \"0\", output: \"0\"}\n", s.typ)
		rule := func(name, phase, service, action, failure, model string) {
			fmt.Fprintf(&rules, "    - {name: %s-%s, phase: %s, service: %s, action: %s, failure: %s, models: [%s-%s]}\n",
				s.typ, name, phase, service, action, failure, s.typ, model)
		}
		rule("block", "request", s.typ, "block", "closed", "block")
		if s.spans {
			rule("mask", "request", s.typ, "mask", "closed", "mask")
		}
		rule("answer", "response", s.typ, "block", "closed", "answer")
		rule("open", "request", s.typ+"-500", "block", "open", "open")
		rule("closed", "request", s.typ+"-500", "block", "closed", "closed")
		rule("hang", "request", s.typ+"-hang", "block", "closed", "hang")
		rule("answer-open", "response", s.typ+"-500", "block", "open", "answer-open")
		rule("answer-closed", "response", s.typ+"-500", "block", "closed", "answer-closed")
	}
	b.WriteString("prices:\n  models:\n" + prices.String())
	b.WriteString("guardrails:\n  services:\n" + services.String() + "  rules:\n" + rules.String())
	path := filepath.Join(t.TempDir(), "services.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Each emulated guard service, through the gateway: it blocks a request
// and an answer, masks where its contract says where, and a failing one
// lets the request through with failure open (saying which rule it
// skipped) or refuses it with 503 with failure closed; one that hangs
// costs the request at most its timeout. The ledger records each.
func TestGuardServices(t *testing.T) {
	a := startDev(t, func(string) string { return "" }, "--config", guardServicesConfig(t))
	chat := func(model, prompt string, stream bool) (int, string, map[string]string, time.Duration) {
		t.Helper()
		id := fmt.Sprintf("svc-%d", guardRequests.Add(1))
		start := time.Now()
		res, body := guardCall(t, a, guardDoors[0], guardDoors[0].body(model, prompt, stream), id)
		took := time.Since(start)
		return res.StatusCode, string(body), map[string]string{"id": id, "skipped": res.Header.Get("x-modelgate-guardrail-skipped"),
			"gateway": res.Header.Get("x-request-id")}, took
	}
	for _, s := range guardServiceTypes {
		t.Run(s.typ, func(t *testing.T) {
			status, body, h, _ := chat(s.typ+"-block", "say forbidden-word please", false)
			if status != 400 || !strings.Contains(body, "content_filter") || len(providerGot(a, h["gateway"])) != 0 {
				t.Errorf("block: %d %s", status, body)
			}
			checkRecord(t, a, h["id"], s.typ+"-block/request/blocked")
			if cost := recordCost(t, a, h["id"]); cost != "0.001" { // one call, at 0.001; the model is free
				t.Errorf("the blocked request cost %q, want the service's call", cost)
			}
			if status, body, h, _ = chat(s.typ+"-block", "hello there", false); status != 200 {
				t.Errorf("clean: %d %s", status, body)
			}
			checkRecord(t, a, h["id"], s.typ+"-block/request/allowed")

			if s.spans {
				status, body, h, _ = chat(s.typ+"-mask", "keep zebra-42 safe", false)
				model := providerGot(a, h["gateway"]) // the model's requests, not the guard service's
				if status != 200 || len(model) != 1 || strings.Contains(string(model[0]), "zebra-42") || !maskRE.Match(model[0]) {
					t.Errorf("mask: %d %s; the model got %q", status, body, model)
				}
				checkRecord(t, a, h["id"], s.typ+"-mask/request/masked")
			}

			status, body, h, _ = chat(s.typ+"-answer", "repeat zebra-42 please", true)
			if status != 200 || strings.Contains(clienttext.Strings(t, []byte(body), true), "zebra-42") || endOf(t, "chat", []byte(body), true) != "content_filter" {
				t.Errorf("answer: %d %s", status, body)
			}
			checkRecord(t, a, h["id"], s.typ+"-answer/response/blocked")

			status, body, h, _ = chat(s.typ+"-open", "say forbidden-word please", false)
			if status != 200 || h["skipped"] != s.typ+"-open" {
				t.Errorf("failure open: %d, skipped %q: %s", status, h["skipped"], body)
			}
			checkRecord(t, a, h["id"], s.typ+"-open/request/error_open")

			status, body, h, _ = chat(s.typ+"-closed", "hello there", false)
			var e struct{ Error struct{ Type, Code string } }
			json.Unmarshal([]byte(body), &e) //nolint:errcheck // checked below
			if status != 503 || e.Error.Code != "guardrail_unavailable" {
				t.Errorf("failure closed: %d %s", status, body)
			}
			checkRecord(t, a, h["id"], s.typ+"-closed/request/error_closed")

			// A failing service on a streamed answer: open lets it through,
			// closed ends it with an error event, and nothing of it.
			status, body, h, _ = chat(s.typ+"-answer-open", "repeat zebra-42 please", true)
			if status != 200 || !strings.Contains(answerText(t, "chat", []byte(body), true), "zebra-42") || endOf(t, "chat", []byte(body), true) != "stop" {
				t.Errorf("answer, failure open: %d %s", status, body)
			}
			checkRecord(t, a, h["id"], s.typ+"-answer-open/response/error_open")
			status, body, h, _ = chat(s.typ+"-answer-closed", "repeat zebra-42 please", true)
			if status != 200 || strings.Contains(body, "zebra-42") || !strings.Contains(body, `"guardrail_unavailable"`) || strings.Contains(body, "[DONE]") {
				t.Errorf("answer, failure closed: %d %s", status, body)
			}
			checkRecord(t, a, h["id"], s.typ+"-answer-closed/response/error_closed")

			// The hanging service's timeout is 300ms: far from Envoy's
			// 10s message timeout, or a hang's forever.
			status, body, h, took := chat(s.typ+"-hang", "hello there", false)
			if status != 503 || took > 5*time.Second {
				t.Errorf("hang: %d after %v: %s", status, took, body)
			}
			checkRecord(t, a, h["id"], s.typ+"-hang/request/error_closed")
		})
	}
}

// recordCost is the cost the ledger records for the request the client
// named id.
func recordCost(t *testing.T, a devAddrs, id string) string {
	t.Helper()
	_, body := a.admin(t, "GET", "/admin/v1/requests?limit=50", "")
	var page struct {
		Data []struct {
			ClientRequestID string `json:"client_request_id"`
			Cost            *string
		}
	}
	json.Unmarshal(body, &page) //nolint:errcheck // none found fails the caller
	for _, r := range page.Data {
		if r.ClientRequestID == id && r.Cost != nil {
			return *r.Cost
		}
	}
	return ""
}
