package services

import (
	"context"
	"net/http"

	"modelgate/extproc/guard"
)

func init() {
	types["azure_content_safety"] = newContentSafety
	types["azure_prompt_shields"] = newPromptShields
}

// azureAPIVersion is the Azure AI Content Safety API version both
// contracts are of.
const azureAPIVersion = "2024-09-01"

// newAzureCaller is the caller of an Azure AI Content Safety operation:
// the key, required, in the Ocp-Apim-Subscription-Key header.
func newAzureCaller(s Spec, operation string) (caller, error) {
	h := http.Header{}
	h.Set("Ocp-Apim-Subscription-Key", s.APIKey)
	c, err := newCaller(s, "/contentsafety/text:"+operation+"?api-version="+azureAPIVersion, h)
	if err != nil {
		return c, err
	}
	return c, c.requireKey()
}

// contentSafety is Azure AI Content Safety's text analysis
// (learn.microsoft.com/azure/ai-services/content-safety/quickstart-text):
// POST {URL}/contentsafety/text:analyze?api-version=2024-09-01 with the
// key in Ocp-Apim-Subscription-Key and {"text", "outputType":
// "FourSeverityLevels"}, answered with {"categoriesAnalysis":
// [{"category", "severity"}], "blocklistsMatch"}. A category at
// Spec.SeverityThreshold or above flags the text; the answer says no
// spans.
type contentSafety struct {
	caller
	threshold int
}

// newContentSafety is the text analysis s specifies; its threshold is 4
// unless s says (0 to 7).
func newContentSafety(s Spec) (guard.Service, error) {
	c, err := newAzureCaller(s, "analyze")
	if err != nil {
		return nil, err
	}
	if s.SeverityThreshold < 0 || s.SeverityThreshold > 7 {
		return nil, c.errorf("SeverityThreshold %d is not within 0 to 7", s.SeverityThreshold)
	}
	cs := &contentSafety{caller: c, threshold: s.SeverityThreshold}
	if cs.threshold == 0 {
		cs.threshold = 4
	}
	return cs, nil
}

// analyzeRequest is the text analysis's request: all four categories.
type analyzeRequest struct {
	Text       string `json:"text"`
	OutputType string `json:"outputType"`
}

// analyzeAnswer is the part of the answer read; pointers tell a member
// missing or null from a zero one.
type analyzeAnswer struct {
	CategoriesAnalysis []*struct {
		Severity *int `json:"severity"`
	} `json:"categoriesAnalysis"`
}

// Check has in's text analysed.
func (cs *contentSafety) Check(ctx context.Context, in guard.Input) (guard.Verdict, error) {
	answer, err := cs.post(ctx, analyzeRequest{Text: in.Text, OutputType: "FourSeverityLevels"})
	if err != nil {
		return guard.Verdict{}, err
	}
	return cs.verdict(answer)
}

// verdict reads the answer: flagged if a category's severity reaches the
// threshold; no category, or one without its severity, is an error.
func (cs *contentSafety) verdict(answer []byte) (guard.Verdict, error) {
	var a analyzeAnswer
	if err := cs.decode(answer, &a); err != nil {
		return guard.Verdict{}, err
	}
	if len(a.CategoriesAnalysis) == 0 {
		return guard.Verdict{}, cs.errorf("answer has no categoriesAnalysis")
	}
	var v guard.Verdict
	for i, c := range a.CategoriesAnalysis {
		if c == nil || c.Severity == nil {
			return guard.Verdict{}, cs.errorf("category %d has no severity", i)
		}
		v.Flagged = v.Flagged || *c.Severity >= cs.threshold
	}
	return v, nil
}

// promptShields is Azure AI Content Safety's Prompt Shields
// (learn.microsoft.com/azure/ai-services/content-safety/quickstart-jailbreak):
// POST
// {URL}/contentsafety/text:shieldPrompt?api-version=2024-09-01 with the
// key in Ocp-Apim-Subscription-Key and {"userPrompt", "documents"},
// answered with {"userPromptAnalysis": {"attackDetected"},
// "documentsAnalysis": [{"attackDetected"}]}. A request's text is the
// user prompt; an answer's, a document (an indirect attack on what
// reads it next). Any attack detected flags the text; the answer says
// no spans.
type promptShields struct{ caller }

// newPromptShields is the Prompt Shields s specifies.
func newPromptShields(s Spec) (guard.Service, error) {
	c, err := newAzureCaller(s, "shieldPrompt")
	if err != nil {
		return nil, err
	}
	return &promptShields{c}, nil
}

// shieldRequest is Prompt Shields' request.
type shieldRequest struct {
	UserPrompt string   `json:"userPrompt"`
	Documents  []string `json:"documents"`
}

// shieldAnalysis is one analysis; a pointer tells the verdict missing
// or null from false.
type shieldAnalysis struct {
	AttackDetected *bool `json:"attackDetected"`
}

// shieldAnswer is the part of the answer read.
type shieldAnswer struct {
	UserPromptAnalysis *shieldAnalysis   `json:"userPromptAnalysis"`
	DocumentsAnalysis  []*shieldAnalysis `json:"documentsAnalysis"`
}

// Check has in's text shielded: as the user prompt at the request phase,
// as a document at the response phase.
func (ps *promptShields) Check(ctx context.Context, in guard.Input) (guard.Verdict, error) {
	req := shieldRequest{UserPrompt: in.Text, Documents: []string{}}
	if in.Phase == guard.Response {
		req = shieldRequest{Documents: []string{in.Text}}
	}
	answer, err := ps.post(ctx, req)
	if err != nil {
		return guard.Verdict{}, err
	}
	return ps.verdict(in.Phase, answer)
}

// verdict reads the answer about a text sent at phase: the analysis of
// what was sent (the user prompt's, or the one document's) is required;
// any analysis detecting an attack flags the text.
func (ps *promptShields) verdict(phase guard.Phase, answer []byte) (guard.Verdict, error) {
	var a shieldAnswer
	if err := ps.decode(answer, &a); err != nil {
		return guard.Verdict{}, err
	}
	if phase == guard.Request && a.UserPromptAnalysis == nil {
		return guard.Verdict{}, ps.errorf("answer has no userPromptAnalysis")
	}
	if phase == guard.Response && len(a.DocumentsAnalysis) != 1 {
		return guard.Verdict{}, ps.errorf("answer has %d documentsAnalysis, not 1", len(a.DocumentsAnalysis))
	}
	analyses := a.DocumentsAnalysis
	if a.UserPromptAnalysis != nil {
		analyses = append(analyses, a.UserPromptAnalysis)
	}
	var v guard.Verdict
	for _, an := range analyses {
		if an == nil || an.AttackDetected == nil {
			return guard.Verdict{}, ps.errorf("an analysis has no attackDetected")
		}
		v.Flagged = v.Flagged || *an.AttackDetected
	}
	return v, nil
}
