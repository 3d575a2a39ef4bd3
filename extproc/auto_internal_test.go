package extproc

import (
	"strings"
	"testing"
	"time"

	"modelgate/authz/pricing"
	"modelgate/envoy/routing"
	"modelgate/translate/api"
	"modelgate/translate/providers"
)

// autoServer is a server of three candidates behind the auto model
// "auto": text-only "cheap" (priced lowest), "vision" (images, a context
// window of 1,000 tokens) and "nova" (Bedrock's Nova, priced highest,
// undeclared), with the prefer given.
func autoServer(t *testing.T, prefer string) *Server {
	t.Helper()
	yes := true
	models := []routing.Model{
		{ID: "cheap", Deployments: []routing.Deployment{{Backend: "o", Model: "m"}}, Capabilities: routing.Capabilities{Input: []string{"text"}, Tools: &yes}},
		{ID: "vision", ContextWindow: 1000, Deployments: []routing.Deployment{{Backend: "a", Model: "claude"}, {Backend: "o", Model: "m2"}},
			Capabilities: routing.Capabilities{Input: []string{"text", "image"}}},
		{ID: "nova", Deployments: []routing.Deployment{{Backend: "b", Model: "us.amazon.nova-micro-v1:0"}}},
		{ID: "auto", Auto: &routing.Auto{Candidates: []string{"cheap", "vision", "nova"}, Prefer: prefer}},
	}
	r, err := newRouter(routing.Table{Backends: []routing.Backend{{Name: "o", Provider: "openai"}, {Name: "a", Provider: "anthropic"},
		{Name: "b", Provider: "bedrock"}}, Models: models}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	prices, err := pricing.NewTable([]pricing.Price{{Model: "cheap", Input: 1, Output: 1}, {Model: "vision", Input: 5, Output: 5},
		{Model: "nova", Input: 9, Output: 9}})
	if err != nil {
		t.Fatal(err)
	}
	ps := map[string]providers.Provider{}
	for _, name := range []string{"openai", "anthropic", "bedrock"} {
		ps[name], _ = providers.Lookup(name)
	}
	return &Server{router: r, providers: ps, cfg: Config{Prices: prices}, now: func() time.Time { return time.Unix(1000, 0) }}
}

func TestAutoChoice(t *testing.T) {
	s := autoServer(t, "cheapest")
	auto := s.router.models["auto"]
	choose := func(n api.Needs, body string) string {
		t.Helper()
		m, err := s.choose(auto, endpointChat, &asks{needs: &n, body: []byte(body)})
		if err != nil {
			return "error: " + err.Error()
		}
		return m.ID
	}
	small := `{"messages":[{"role":"user","content":"hi"}]}`
	large := `{"messages":[{"role":"user","content":"` + strings.Repeat("word ", 2000) + `"}]}`
	for _, tt := range []struct {
		name  string
		needs api.Needs
		body  string
		want  string
	}{
		{"text goes to the cheapest", api.Needs{}, small, "cheap"},
		{"an image to the cheapest that reads images", api.Needs{Uses: []api.Capability{api.CapImage}}, small, "vision"},
		{"a prompt beyond a window passes that model by", api.Needs{Uses: []api.Capability{api.CapAudio}}, large, "nova"},
		{"reasoning passes Nova by (Bedrock's Nova does not reason)", api.Needs{Uses: []api.Capability{api.CapImage, api.CapReasoning}}, small, "vision"},
		{"an image too large for the one window that reasons on it", api.Needs{Uses: []api.Capability{api.CapImage, api.CapReasoning}}, large, "error: "},
	} {
		if got := choose(tt.needs, tt.body); got != tt.want && !(strings.HasSuffix(tt.want, ": ") && strings.HasPrefix(got, tt.want)) {
			t.Errorf("%s: chose %q, want %q", tt.name, got, tt.want)
		}
	}
	_, err := s.choose(auto, endpointChat, &asks{needs: &api.Needs{Uses: []api.Capability{api.CapImage, api.CapReasoning}}, body: []byte(large)})
	if err == nil || !strings.Contains(err.Error(), "`cheap` does not support image input") || !strings.Contains(err.Error(), "`vision` has a context window of 1000 tokens") ||
		!strings.Contains(err.Error(), "`nova` does not support reasoning") {
		t.Errorf("no candidate: %v, want what each lacked", err)
	}

	// A candidate whose every deployment failed three times in a row is
	// passed by until its ejection ends; one deployment of two is not.
	now := s.now()
	cheap, vision := s.router.models["cheap"], s.router.models["vision"]
	for range defaultConsecutive {
		s.health.observe(cheap, "o", false, true, 0, now)
		s.health.observe(vision, "a", false, true, 0, now)
	}
	if got := choose(api.Needs{}, small); got != "vision" {
		t.Errorf("with cheap ejected: %q, want vision (one of its two deployments is up)", got)
	}
	s.health.observe(vision, "o", false, true, 0, now)
	s.health.observe(vision, "o", false, true, 0, now)
	if got := choose(api.Needs{}, small); got != "vision" {
		t.Errorf("two failures are no ejection: %q", got)
	}
	s.health.observe(vision, "o", false, true, 0, now)
	if got := choose(api.Needs{}, small); got != "nova" {
		t.Errorf("with cheap and vision ejected: %q, want nova", got)
	}
	if got := choose(api.Needs{Uses: []api.Capability{api.CapImage, api.CapReasoning}}, small); got != "vision" {
		t.Errorf("every capable candidate ejected: %q, want vision all the same", got)
	}
	s.now = func() time.Time { return now.Add(defaultEjection) }
	if got := choose(api.Needs{}, small); got != "cheap" {
		t.Errorf("after the ejection: %q, want cheap again", got)
	}
	s.health.observe(cheap, "o", true, false, 0, s.now())
	s.health.observe(cheap, "o", false, true, 0, s.now())
	if got := choose(api.Needs{}, small); got != "cheap" {
		t.Errorf("an answer restarts the count: %q", got)
	}
}

// prefer: fastest ranks by the time to first token measured, a model
// never measured first (it is tried once to be ranked).
func TestAutoFastest(t *testing.T) {
	s := autoServer(t, "fastest")
	auto, now := s.router.models["auto"], s.now()
	pick := func() string {
		m, err := s.choose(auto, endpointChat, &asks{needs: &api.Needs{}, body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	if got := pick(); got != "cheap" {
		t.Errorf("nothing measured: %q, want the first candidate", got)
	}
	s.health.observe(s.router.models["cheap"], "o", true, false, 900*time.Millisecond, now)
	s.health.observe(s.router.models["nova"], "b", true, false, 200*time.Millisecond, now)
	if got := pick(); got != "vision" {
		t.Errorf("vision unmeasured: %q, want vision", got)
	}
	s.health.observe(s.router.models["vision"], "a", true, false, 400*time.Millisecond, now)
	if got := pick(); got != "nova" {
		t.Errorf("nova fastest: %q", got)
	}
	for range 10 { // the average follows what the model does now
		s.health.observe(s.router.models["nova"], "b", true, false, 2*time.Second, now)
	}
	if got := pick(); got != "vision" {
		t.Errorf("nova slowed down: %q, want vision", got)
	}
}

// A capability is lacking when declared so, or when the provider table
// knows it (Bedrock's models but Claude do not reason); the model's drop
// list serves the request without it, else it is refused.
func TestCapabilityRefusals(t *testing.T) {
	no := false
	r, err := newRouter(routing.Table{Backends: []routing.Backend{{Name: "b", Provider: "bedrock"}, {Name: "o", Provider: "openai"}}, Models: []routing.Model{
		{ID: "nova", Deployments: []routing.Deployment{{Backend: "b", Model: "us.amazon.nova-pro-v1:0"}}},
		{ID: "nova-agent", Deployments: []routing.Deployment{{Backend: "b", Model: "us.amazon.nova-pro-v1:0"}},
			Capabilities: routing.Capabilities{Drop: []string{"reasoning", "tools"}, Tools: &no, MaxOutput: 100}},
		{ID: "claude", Deployments: []routing.Deployment{{Backend: "b", Model: "us.anthropic.claude-sonnet-4-5-v1:0"}}},
		{ID: "plain", Deployments: []routing.Deployment{{Backend: "o", Model: "m"}}, Capabilities: routing.Capabilities{Input: []string{"text", "file"}}},
	}}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	ps := map[string]providers.Provider{}
	ps["bedrock"], _ = providers.Lookup("bedrock")
	ps["openai"], _ = providers.Lookup("openai")
	uses := func(cs ...api.Capability) *asks { return &asks{needs: &api.Needs{Uses: cs}} }
	for _, tt := range []struct {
		model string
		a     *asks
		drop  string
		err   string
	}{
		{"nova", uses(api.CapReasoning), "", "The model `nova` does not support reasoning"},
		{"nova", uses(api.CapTools, api.CapImage), "", ""},
		{"nova-agent", uses(api.CapReasoning, api.CapTools), "[reasoning tools]", ""},
		{"nova-agent", &asks{needs: &api.Needs{MaxOutput: 101}}, "", "at most 100 tokens"},
		{"claude", uses(api.CapReasoning), "", ""},
		{"plain", uses(api.CapFile, api.CapReasoning, api.CapJSONSchema), "", ""},
		{"plain", uses(api.CapAudio), "", "does not support audio input"},
		{"plain", nil, "", ""},
	} {
		drop, err := r.serves(r.models[tt.model], tt.a)
		got := ""
		if len(drop) > 0 {
			got = "[" + strings.Join(capStrings(drop), " ") + "]"
		}
		if got != tt.drop || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s %v: dropped %s, %v; want %s, %q", tt.model, tt.a, got, err, tt.drop, tt.err)
		}
		if ae, ok := err.(*APIError); ok && (ae.Status != 400 || ae.Type != typeInvalidRequest) {
			t.Errorf("%s: %d %s, want a 400 invalid_request_error", tt.model, ae.Status, ae.Type)
		}
	}
}

func capStrings(cs []api.Capability) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// A price per million tokens is listed per token, as OpenRouter's
// pricing is, exactly.
func TestPerToken(t *testing.T) {
	for n, want := range map[pricing.Nanos]string{
		3 * pricing.NanosPerUnit: "0.000003", 15 * pricing.NanosPerUnit / 100: "0.00000015", 1: "0.000000000000001", 0: "0",
		1234 * pricing.NanosPerUnit: "0.001234",
	} {
		if got := perToken(n); got != want {
			t.Errorf("perToken(%d) = %s, want %s", n, got, want)
		}
	}
}
