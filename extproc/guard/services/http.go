package services

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"modelgate/extproc/guard"
)

func init() { types["http"] = newGeneric }

// maxAnswer is the most of a service's answer a check reads: 1 MiB.
const maxAnswer = 1 << 20

// caller makes a JSON service's calls: one POST per check to url with
// header, its answer read only when the status is 2xx.
type caller struct {
	spec   Spec
	url    string
	header http.Header
}

// newCaller is the caller of path under s.URL (s.URL itself, as it is,
// when path is empty), sending header and the JSON content type with
// each call.
func newCaller(s Spec, path string, header http.Header) (caller, error) {
	c := caller{spec: s, header: header}
	if s.URL == "" {
		return c, c.errorf("URL is required")
	}
	// The URL is not echoed: it may carry credentials.
	if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, c.errorf("URL is not an absolute http or https URL")
	}
	c.url = s.URL
	if path != "" {
		c.url = strings.TrimSuffix(s.URL, "/") + path
	}
	c.header.Set("Content-Type", "application/json")
	return c, nil
}

// requireKey fails when the contract needs Spec.APIKey and it is empty.
func (c caller) requireKey() error {
	if c.spec.APIKey == "" {
		return c.errorf("APIKey is required")
	}
	return nil
}

// bearer is the header that sends key as a bearer token; none when key
// is empty.
func bearer(key string) http.Header {
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return h
}

// post sends body, as JSON, and returns the answer's body. A status
// other than 2xx or an answer over maxAnswer is an error; so is the
// context ending, which bounds the call.
func (c caller) post(ctx context.Context, body any) ([]byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, c.errorf("encoding the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(payload))
	if err != nil {
		return nil, c.errorf("building the request: %w", err)
	}
	req.Header = c.header.Clone()
	resp, err := c.spec.Client.Do(req)
	if err != nil {
		return nil, c.errorf("calling: %w", err)
	}
	defer resp.Body.Close()
	// The answer's body is not quoted: it may echo the text.
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.errorf("answer status %d", resp.StatusCode)
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, c.errorf("reading the answer: %w", err)
	}
	if len(answer) > maxAnswer {
		return nil, c.errorf("answer over %d bytes", maxAnswer)
	}
	return answer, nil
}

// decode reads answer, JSON, into v. Its errors say where the JSON
// broke, never what it held: an answer may echo the text.
func (c caller) decode(answer []byte, v any) error {
	err := json.Unmarshal(answer, v)
	var syntax *json.SyntaxError
	var member *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &syntax):
		return c.errorf("malformed answer: not JSON at byte %d", syntax.Offset)
	case errors.As(err, &member) && member.Field != "":
		return c.errorf("malformed answer: member %s is not %s", member.Field, jsonKind(member.Type))
	case errors.As(err, &member):
		return c.errorf("malformed answer: not %s", jsonKind(member.Type))
	}
	return c.errorf("malformed answer")
}

// jsonKind is the JSON value t reads, a pointer read as what it points
// to: "an object", "an array", "an integer".
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int:
		return "an integer"
	}
	return t.Kind().String()
}

// errorf is an error of the service, naming it and its contract. The
// text checked and the key are never in one.
func (c caller) errorf(format string, args ...any) error {
	return fmt.Errorf("guard service %q (%s): %w", c.spec.Name, c.spec.Type, fmt.Errorf(format, args...))
}

// byteSpans converts spans of Unicode code point offsets into text, as
// Python's string indices are, to byte offsets. A span out of the text,
// or with start >= end, is an error.
func (c caller) byteSpans(text string, spans [][2]int) ([][2]int, error) {
	if len(spans) == 0 {
		return nil, nil
	}
	// offsets[i] is where code point i starts; the last, the text's end.
	// An invalid UTF-8 byte is one code point, as JSON encoding makes it
	// one U+FFFD.
	offsets := make([]int, 0, len(text)+1)
	for i := range text {
		offsets = append(offsets, i)
	}
	offsets = append(offsets, len(text))
	out := make([][2]int, len(spans))
	for i, sp := range spans {
		if sp[0] < 0 || sp[0] >= sp[1] || sp[1] >= len(offsets) {
			return nil, c.errorf("span %d [%d, %d) is empty or not within the text's %d code points", i, sp[0], sp[1], len(offsets)-1)
		}
		out[i] = [2]int{offsets[sp[0]], offsets[sp[1]]}
	}
	return out, nil
}

// generic is a service of the small generic HTTP contract (Agent
// Router's proposal; docs/guardrails.md, "Guard services"): POST {URL},
// the URL being the whole endpoint, with
// {"text", "context": {"stage": "request"|"response"}} and a bearer key
// if Spec.APIKey is set, answered with
// {"action": "allow"|"block"|"modify", "findings": [{"type", "start",
// "end", "score"}], "replacement"?}. The findings' offsets are Unicode
// code points; unknown members, and the replacement, are ignored (a
// mask is the gateway's own).
type generic struct{ caller }

// newGeneric is the generic HTTP service s specifies.
func newGeneric(s Spec) (guard.Service, error) {
	c, err := newCaller(s, "", bearer(s.APIKey))
	if err != nil {
		return nil, err
	}
	return &generic{c}, nil
}

// genericRequest is the generic contract's request.
type genericRequest struct {
	Text    string `json:"text"`
	Context struct {
		Stage string `json:"stage"`
	} `json:"context"`
}

// genericAnswer is the part of the generic contract's answer read;
// pointers tell a member missing or null from a zero one.
type genericAnswer struct {
	Action   *string `json:"action"`
	Findings []*struct {
		Start *int `json:"start"`
		End   *int `json:"end"`
	} `json:"findings"`
}

// Check asks the service about in's text, at in's phase.
func (g *generic) Check(ctx context.Context, in guard.Input) (guard.Verdict, error) {
	req := genericRequest{Text: in.Text}
	req.Context.Stage = in.Phase.String()
	answer, err := g.post(ctx, req)
	if err != nil {
		return guard.Verdict{}, err
	}
	return g.verdict(in.Text, answer)
}

// verdict reads the answer about text: block or modify flag it, with
// the findings' spans; allow passes it; any other action is an error.
func (g *generic) verdict(text string, answer []byte) (guard.Verdict, error) {
	var a genericAnswer
	if err := g.decode(answer, &a); err != nil {
		return guard.Verdict{}, err
	}
	if a.Action == nil {
		return guard.Verdict{}, g.errorf("answer has no action")
	}
	spans := make([][2]int, len(a.Findings))
	for i, f := range a.Findings {
		if f == nil || f.Start == nil || f.End == nil {
			return guard.Verdict{}, g.errorf("finding %d has no start or end", i)
		}
		spans[i] = [2]int{*f.Start, *f.End}
	}
	spans, err := g.byteSpans(text, spans)
	if err != nil {
		return guard.Verdict{}, err
	}
	switch *a.Action {
	case "allow":
		return guard.Verdict{}, nil
	case "block", "modify":
		return guard.Verdict{Flagged: true, Spans: spans}, nil
	}
	// The action is not quoted: an answer may echo the text anywhere.
	return guard.Verdict{}, g.errorf("answer's action is not allow, block or modify")
}
