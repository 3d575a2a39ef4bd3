package services

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"modelgate/extproc/guard"
)

func init() { types["llm_judge"] = newJudge }

// judge is a chat model judging text with Llama Guard 3's prompt
// (www.llama.com/docs/model-cards-and-prompt-formats/llama-guard-3):
// POST {url}/chat/completions, OpenAI's chat completions
// (platform.openai.com/docs/api-reference/chat/create), with the prompt
// as the one user message. The first choice's answer is "safe", or
// "unsafe" and a line of the categories the text violates ("S1,S9"),
// which flags it; it says no where.
type judge struct {
	spec     Spec
	endpoint *url.URL
}

// newJudge checks s names a model and an OpenAI base URL (ending in /v1,
// as a rule). The API key is optional: a local server may need none.
func newJudge(s Spec) (guard.Service, error) {
	if s.Model == "" {
		return nil, fmt.Errorf("guard service %q: model is required", s.Name)
	}
	if s.URL == "" {
		return nil, fmt.Errorf("guard service %q: url is required (an OpenAI base URL such as https://host/v1)", s.Name)
	}
	u, err := serviceURL(s, s.URL, "/chat/completions")
	if err != nil {
		return nil, err
	}
	return &judge{spec: s, endpoint: u}, nil
}

// Check asks the model whether in's text, the user's in the request
// phase or the agent's in the response phase, is unsafe.
func (j *judge) Check(ctx context.Context, in guard.Input) (guard.Verdict, error) {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	body, err := json.Marshal(struct {
		Model       string    `json:"model"`
		Messages    []message `json:"messages"`
		MaxTokens   int       `json:"max_tokens"`
		Temperature float64   `json:"temperature"`
	}{j.spec.Model, []message{{"user", judgePrompt(in)}}, 20, 0})
	if err != nil {
		return guard.Verdict{}, err
	}
	req, err := http.NewRequest(http.MethodPost, j.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return guard.Verdict{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if j.spec.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+j.spec.APIKey)
	}
	answer, err := guardCall(ctx, j.spec, req)
	if err != nil {
		return guard.Verdict{}, err
	}
	return parseJudge(j.spec.Name, answer)
}

// judgeCategories are Llama Guard 3's unsafe content categories, as its
// prompt lists them.
const judgeCategories = `S1: Violent Crimes.
S2: Non-Violent Crimes.
S3: Sex Crimes.
S4: Child Exploitation.
S5: Defamation.
S6: Specialized Advice.
S7: Privacy.
S8: Intellectual Property.
S9: Indiscriminate Weapons.
S10: Hate.
S11: Self-Harm.
S12: Sexual Content.
S13: Elections.
S14: Code Interpreter Abuse.`

// judgePrompt is Llama Guard 3's prompt for in: a conversation of one
// User message (request phase) or one Agent message (response phase).
// The chat API adds the model's own special tokens.
func judgePrompt(in guard.Input) string {
	role := "User"
	if in.Phase == guard.Response {
		role = "Agent"
	}
	return "Task: Check if there is unsafe content in '" + role + "' messages in conversations according our safety policy with the below categories.\n\n" +
		"<BEGIN UNSAFE CONTENT CATEGORIES>\n" + judgeCategories + "\n<END UNSAFE CONTENT CATEGORIES>\n\n" +
		"<BEGIN CONVERSATION>\n\n" + role + ": " + in.Text + "\n\n<END CONVERSATION>\n\n" +
		"Provide your safety assessment for ONLY THE LAST " + role + " message in the above conversation:\n" +
		" - First line must read 'safe' or 'unsafe'.\n" +
		" - If unsafe, a second line must include a comma-separated list of violated categories."
}

// judgeCategory is a category code in an unsafe verdict.
var judgeCategory = regexp.MustCompile(`^S[0-9]{1,2}$`)

// parseJudge reads a chat completion whose first choice is a Llama Guard
// verdict. Anything but "safe" or "unsafe" and a category line is an
// error: the model did not judge. The answer's text is never in an error,
// since a model may repeat what it judged.
func parseJudge(name string, body []byte) (guard.Verdict, error) {
	var a *struct {
		Choices []*struct {
			Message *struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return guard.Verdict{}, fmt.Errorf("guard service %q: the answer is not a chat completion's JSON: %w", name, err)
	}
	if a == nil || len(a.Choices) == 0 || a.Choices[0] == nil || a.Choices[0].Message == nil || a.Choices[0].Message.Content == nil {
		return guard.Verdict{}, fmt.Errorf("guard service %q: the answer has no choice with content", name)
	}
	verdict, categories, _ := strings.Cut(strings.TrimSpace(*a.Choices[0].Message.Content), "\n")
	switch strings.TrimSpace(verdict) {
	case "safe":
		if categories == "" {
			return guard.Verdict{}, nil
		}
	case "unsafe":
		if judgeCategoryLine(categories) {
			return guard.Verdict{Flagged: true}, nil
		}
	}
	return guard.Verdict{}, fmt.Errorf("guard service %q: the model's answer is not 'safe' or 'unsafe' and a line of categories", name)
}

// judgeCategoryLine reports whether line is a comma-separated list of
// category codes.
func judgeCategoryLine(line string) bool {
	for c := range strings.SplitSeq(line, ",") {
		if !judgeCategory.MatchString(strings.TrimSpace(c)) {
			return false
		}
	}
	return true
}
