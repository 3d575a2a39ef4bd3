package services

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"golang.org/x/oauth2/jwt"

	"modelgate/extproc/guard"
)

func init() { types["model_armor"] = newModelArmor }

// modelArmor is Google Cloud's Model Armor
// (docs.cloud.google.com/model-armor/sanitize-prompts-responses and
// /model-armor/reference/rest/v1/SanitizationResult): in the
// request phase POST {base}/v1/{template}:sanitizeUserPrompt
// {"userPromptData": {"text": ...}}, in the response phase
// {base}/v1/{template}:sanitizeModelResponse {"modelResponseData":
// {"text": ...}}, with a service account's OAuth2 token. The answer's
// sanitizationResult.filterMatchState MATCH_FOUND flags the text; it
// says no where.
type modelArmor struct {
	spec Spec
	// prompt and response are the two verbs' URLs.
	prompt, response *url.URL
	token            *googleToken
}

// modelArmorTemplate is a template's resource name; its location names
// the regional endpoint.
var modelArmorTemplate = regexp.MustCompile(`^projects/[A-Za-z0-9._:-]+/locations/([a-z0-9-]+)/templates/[A-Za-z0-9_-]+$`)

// newModelArmor checks s names a template and has a service account key.
func newModelArmor(s Spec) (guard.Service, error) {
	m := modelArmorTemplate.FindStringSubmatch(s.Template)
	if m == nil {
		return nil, fmt.Errorf("guard service %q: template must be projects/PROJECT/locations/LOCATION/templates/TEMPLATE", s.Name)
	}
	token, err := newGoogleToken(s)
	if err != nil {
		return nil, err
	}
	base := s.URL
	if base == "" {
		base = "https://modelarmor." + m[1] + ".rep.googleapis.com"
	}
	prompt, err := serviceURL(s, base, "/v1/"+s.Template+":sanitizeUserPrompt")
	if err != nil {
		return nil, err
	}
	response, err := serviceURL(s, base, "/v1/"+s.Template+":sanitizeModelResponse")
	if err != nil {
		return nil, err
	}
	return &modelArmor{spec: s, prompt: prompt, response: response, token: token}, nil
}

// Check sanitizes in's text as a user prompt in the request phase, as a
// model response in the response phase.
func (m *modelArmor) Check(ctx context.Context, in guard.Input) (guard.Verdict, error) {
	type data struct {
		Text string `json:"text"`
	}
	endpoint, member := m.prompt, "userPromptData"
	if in.Phase == guard.Response {
		endpoint, member = m.response, "modelResponseData"
	}
	body, err := json.Marshal(map[string]data{member: {in.Text}})
	if err != nil {
		return guard.Verdict{}, err
	}
	token, err := m.token.get(ctx)
	if err != nil {
		return guard.Verdict{}, err
	}
	req, err := http.NewRequest(http.MethodPost, endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return guard.Verdict{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	answer, err := guardCall(ctx, m.spec, req)
	if err != nil {
		return guard.Verdict{}, err
	}
	return parseModelArmor(m.spec.Name, answer)
}

// modelArmorAnswer is what both verbs answer, as far as a verdict needs.
type modelArmorAnswer struct {
	SanitizationResult *struct {
		FilterMatchState string `json:"filterMatchState"`
		InvocationResult string `json:"invocationResult"`
	} `json:"sanitizationResult"`
}

// parseModelArmor reads a sanitize answer: flagged when a filter matched.
// No match is a pass only when every filter ran (an invocationResult of
// PARTIAL or FAILURE says some did not).
func parseModelArmor(name string, body []byte) (guard.Verdict, error) {
	var a *modelArmorAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return guard.Verdict{}, fmt.Errorf("guard service %q: the answer is not Model Armor's JSON: %w", name, err)
	}
	if a == nil || a.SanitizationResult == nil {
		return guard.Verdict{}, fmt.Errorf("guard service %q: the answer has no sanitizationResult", name)
	}
	r := a.SanitizationResult
	switch r.FilterMatchState {
	case "MATCH_FOUND":
		return guard.Verdict{Flagged: true}, nil
	case "NO_MATCH_FOUND":
		if r.InvocationResult == "PARTIAL" || r.InvocationResult == "FAILURE" {
			return guard.Verdict{}, fmt.Errorf("guard service %q: filters failed to run (invocationResult %s)", name, r.InvocationResult)
		}
		return guard.Verdict{}, nil
	case "":
		return guard.Verdict{}, fmt.Errorf("guard service %q: the answer has no filterMatchState", name)
	}
	return guard.Verdict{}, fmt.Errorf("guard service %q: the answer's filterMatchState is neither MATCH_FOUND nor NO_MATCH_FOUND", name)
}

// googleToken mints a service account's OAuth2 access tokens for Google
// Cloud (the JWT bearer grant at the key's token_uri, scope
// cloud-platform) and keeps each until five minutes before it expires.
type googleToken struct {
	spec Spec
	conf *jwt.Config
	// lock serializes minting; a check waiting for it can give up.
	lock chan struct{}
	tok  *oauth2.Token
}

// newGoogleToken reads s's service account key.
func newGoogleToken(s Spec) (*googleToken, error) {
	if s.ServiceAccount == "" {
		return nil, fmt.Errorf("guard service %q: service_account is required", s.Name)
	}
	conf, err := google.JWTConfigFromJSON([]byte(s.ServiceAccount), "https://www.googleapis.com/auth/cloud-platform")
	if err != nil {
		return nil, fmt.Errorf("guard service %q: service_account is not a service account's JSON key", s.Name)
	}
	if conf.Email == "" {
		return nil, fmt.Errorf("guard service %q: service_account has no client_email", s.Name)
	}
	if block, _ := pem.Decode(conf.PrivateKey); block == nil {
		return nil, fmt.Errorf("guard service %q: service_account has no PEM private_key", s.Name)
	}
	return &googleToken{spec: s, conf: conf, lock: make(chan struct{}, 1)}, nil
}

// get is a token valid for five minutes at least, minted under ctx when
// the one kept is not.
func (g *googleToken) get(ctx context.Context) (string, error) {
	select {
	case g.lock <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("guard service %q: waiting for an OAuth token: %w", g.spec.Name, ctx.Err())
	}
	defer func() { <-g.lock }()
	if g.tok != nil && (g.tok.Expiry.IsZero() || time.Until(g.tok.Expiry) > 5*time.Minute) {
		return g.tok.AccessToken, nil
	}
	// The token source sends its request without a context: the client
	// it is given sends it under ctx.
	client := &http.Client{Transport: boundTransport{ctx, g.spec.Client.Transport}}
	tok, err := g.conf.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, client)).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil {
			return "", fmt.Errorf("guard service %q: the OAuth token endpoint answered %d", g.spec.Name, re.Response.StatusCode)
		}
		return "", fmt.Errorf("guard service %q: getting an OAuth token: %w", g.spec.Name, err)
	}
	g.tok = tok
	return tok.AccessToken, nil
}

// boundTransport sends requests under ctx, with base (nil:
// http.DefaultTransport).
type boundTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

// RoundTrip sends r under the transport's context.
func (b boundTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := b.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r.WithContext(b.ctx))
}
