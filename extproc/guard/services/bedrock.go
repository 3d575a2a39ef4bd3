package services

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"modelgate/extproc/guard"
	"modelgate/translate/bedrock"
)

func init() { types["bedrock_guardrail"] = newBedrock }

// bedrockGuardrail is AWS Bedrock's ApplyGuardrail
// (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ApplyGuardrail.html):
// POST {base}/guardrail/{id}/version/{version}/apply, signed with SigV4
// for service bedrock, {"source": "INPUT"|"OUTPUT", "content": [{"text":
// {"text": ...}}]}. The answer's action GUARDRAIL_INTERVENED flags the
// text; the matches its sensitive information and word policies report
// are where.
type bedrockGuardrail struct {
	spec Spec
	// endpoint is the apply URL.
	endpoint *url.URL
}

// The shapes of a guardrail and its version, as ApplyGuardrail's
// guardrailIdentifier and guardrailVersion document them: an id or the
// guardrail's ARN; a version number or DRAFT.
var (
	bedrockGuardrailID      = regexp.MustCompile(`^(?:[a-z0-9]+|arn:aws(?:-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:guardrail/[a-z0-9]+)$`)
	bedrockGuardrailVersion = regexp.MustCompile(`^(?:[1-9][0-9]{0,7}|DRAFT)$`)
	bedrockRegion           = regexp.MustCompile(`^[a-z0-9-]+$`)
)

// newBedrock checks s names a guardrail, its version, a region and
// credentials.
func newBedrock(s Spec) (guard.Service, error) {
	switch {
	case !bedrockGuardrailID.MatchString(s.GuardrailID):
		return nil, fmt.Errorf("guard service %q: guardrail_id must be a guardrail's id or ARN", s.Name)
	case !bedrockGuardrailVersion.MatchString(s.GuardrailVersion):
		return nil, fmt.Errorf("guard service %q: guardrail_version must be a version number or DRAFT", s.Name)
	case !bedrockRegion.MatchString(s.Region):
		return nil, fmt.Errorf("guard service %q: region must be an AWS region such as us-east-1", s.Name)
	case s.AWSAccessKeyID == "" || s.AWSSecretAccessKey == "":
		return nil, fmt.Errorf("guard service %q: AWS credentials need an access key id and a secret access key", s.Name)
	}
	base := s.URL
	if base == "" {
		base = "https://bedrock-runtime." + s.Region + ".amazonaws.com"
	}
	// An ARN's ':' and '/' are escaped, as AWS's SDKs send them.
	escape := strings.NewReplacer(":", "%3A", "/", "%2F").Replace
	u, err := serviceURL(s, base, "/guardrail/"+escape(s.GuardrailID)+"/version/"+s.GuardrailVersion+"/apply")
	if err != nil {
		return nil, err
	}
	return &bedrockGuardrail{spec: s, endpoint: u}, nil
}

// Check applies the guardrail to in's text: as the model's input in the
// request phase, as its output in the response phase.
func (b *bedrockGuardrail) Check(ctx context.Context, in guard.Input) (guard.Verdict, error) {
	source := "INPUT"
	if in.Phase == guard.Response {
		source = "OUTPUT"
	}
	type text struct {
		Text string `json:"text"`
	}
	type content struct {
		Text text `json:"text"`
	}
	body, err := json.Marshal(struct {
		Source  string    `json:"source"`
		Content []content `json:"content"`
	}{source, []content{{text{in.Text}}}})
	if err != nil {
		return guard.Verdict{}, err
	}
	req, err := http.NewRequest(http.MethodPost, b.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return guard.Verdict{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	creds := bedrock.Credentials{AccessKeyID: b.spec.AWSAccessKeyID, SecretAccessKey: b.spec.AWSSecretAccessKey, SessionToken: b.spec.AWSSessionToken}
	for _, h := range bedrock.Sign(creds, b.spec.Region, req.Method, req.URL.Host, req.URL.EscapedPath(), "application/json", body, b.spec.Now()) {
		req.Header.Set(h.Name, h.Value)
	}
	answer, err := guardCall(ctx, b.spec, req)
	if err != nil {
		return guard.Verdict{}, err
	}
	return parseBedrock(b.spec.Name, answer, in.Text)
}

// bedrockAnswer is what ApplyGuardrail answers, as far as a verdict
// needs.
type bedrockAnswer struct {
	Action      string `json:"action"`
	Assessments []*struct {
		SensitiveInformationPolicy *struct {
			PiiEntities []bedrockMatch `json:"piiEntities"`
			Regexes     []bedrockMatch `json:"regexes"`
		} `json:"sensitiveInformationPolicy"`
		WordPolicy *struct {
			CustomWords      []bedrockMatch `json:"customWords"`
			ManagedWordLists []bedrockMatch `json:"managedWordLists"`
		} `json:"wordPolicy"`
	} `json:"assessments"`
}

// bedrockMatch is a piece of the text a policy found, and what the
// guardrail did with it (NONE: only detected).
type bedrockMatch struct {
	Match  string `json:"match"`
	Action string `json:"action"`
}

// parseBedrock reads an ApplyGuardrail answer about text: flagged when
// the guardrail intervened, with spans where its policies' matches are
// in text.
func parseBedrock(name string, body []byte, text string) (guard.Verdict, error) {
	var a *bedrockAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return guard.Verdict{}, fmt.Errorf("guard service %q: the answer is not ApplyGuardrail's JSON: %w", name, err)
	}
	if a == nil {
		return guard.Verdict{}, fmt.Errorf("guard service %q: the answer is null", name)
	}
	switch a.Action {
	case "NONE":
		return guard.Verdict{}, nil
	case "GUARDRAIL_INTERVENED":
		return guard.Verdict{Flagged: true, Spans: spansOf(text, a.matches())}, nil
	case "":
		return guard.Verdict{}, fmt.Errorf("guard service %q: the answer has no action", name)
	}
	return guard.Verdict{}, fmt.Errorf("guard service %q: the answer's action is neither GUARDRAIL_INTERVENED nor NONE", name)
}

// matches are the texts the guardrail acted on (PII, regular
// expressions' matches and words), each once.
func (a *bedrockAnswer) matches() []string {
	var out []string
	add := func(ms []bedrockMatch) {
		for _, m := range ms {
			if m.Match != "" && m.Action != "NONE" {
				out = append(out, m.Match)
			}
		}
	}
	for _, as := range a.Assessments {
		if as == nil {
			continue
		}
		if p := as.SensitiveInformationPolicy; p != nil {
			add(p.PiiEntities)
			add(p.Regexes)
		}
		if p := as.WordPolicy; p != nil {
			add(p.CustomWords)
			add(p.ManagedWordLists)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// spansOf is where in text each of matches occurs, every occurrence,
// sorted and merged where they overlap.
func spansOf(text string, matches []string) [][2]int {
	var spans [][2]int
	for _, m := range matches {
		for at := 0; ; {
			i := strings.Index(text[at:], m)
			if i < 0 {
				break
			}
			spans = append(spans, [2]int{at + i, at + i + len(m)})
			at += i + len(m)
		}
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var merged [][2]int
	for _, s := range spans {
		if n := len(merged); n > 0 && s[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], s[1])
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// serviceURL is base with path appended; base must be an http(s) URL.
func serviceURL(s Spec, base, path string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/") + path)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("guard service %q: url must be an http or https URL", s.Name)
	}
	return u, nil
}

// guardCall makes a check's one call: req under ctx with s's client,
// without retries. It is the answer's body, at most 1 MiB of it, when
// the status is 2xx.
func guardCall(ctx context.Context, s Spec, req *http.Request) ([]byte, error) {
	resp, err := s.Client.Do(req.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("guard service %q: %w", s.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("guard service %q answered %d", s.Name, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("guard service %q: reading the answer: %w", s.Name, err)
	}
	return body, nil
}
