package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/sse"
)

type chat struct {
	report  translate.Output // what the last ResponseBody returned
	target  translate.Target
	req     *api.ChatRequest
	now     func() time.Time
	status  int
	stream  bool
	created int64
	usage   translate.Usage
	dec     sse.Decoder
	st      streamState
	// searches are the answer's Google Search queries, which usage
	// counts as its web searches (Usage).
	searches searchQueries
	// version is a JSON answer's modelVersion (a stream's is st.model).
	version string
}

// NewChat returns the chat translator for provider gemini.
func NewChat(t translate.Target, req *api.ChatRequest) translate.Translator {
	return &chat{target: t, req: req, now: time.Now}
}

// RequestBody builds the generateContent request.
func (c *chat) RequestBody() (translate.Upstream, error) {
	r, err := buildRequest(c.req, c.target.WebSearch)
	if err != nil {
		return translate.Upstream{}, err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return translate.Upstream{}, err
	}
	method := ":generateContent"
	if c.req.Stream {
		method = ":streamGenerateContent?alt=sse"
	}
	return upstream(c.target, method, body), nil
}

// upstream is a request for method (such as ":generateContent") on the
// target's model, with its API key.
func upstream(t translate.Target, method string, body []byte) translate.Upstream {
	headers := []translate.Header{{Name: "content-type", Value: "application/json"}}
	if t.APIKey != "" {
		headers = append(headers, translate.Header{Name: "x-goog-api-key", Value: t.APIKey})
	}
	return translate.Upstream{Body: body, Path: t.BasePath + "/v1beta/models/" + url.PathEscape(t.Model) + method, Headers: headers}
}

// ResponseHeaders streams successful event streams.
func (c *chat) ResponseHeaders(status int, contentType string) translate.Head {
	c.status, c.created = status, c.now().Unix()
	c.st.head = nil // the chunks' head holds the time
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case status/100 == 2 && mt == "text/event-stream":
		c.stream = true
		return translate.Head{Status: status, ContentType: "text/event-stream; charset=utf-8", Stream: true}
	case status/100 == 2:
		return translate.Head{Status: status, ContentType: "application/json"}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return translate.Head{Status: http.StatusBadGateway, ContentType: "application/json"}
	}
	return translate.Head{Status: status, ContentType: "application/json"}
}

// ResponseBody implements translate.Translator, and reports what it
// returns.
func (c *chat) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := c.responseBody(chunk, endOfStream)
	c.report.Later(translate.Chat, out, c.status, c.stream)
	return out, err
}

// Output implements translate.Reporter.
func (c *chat) Output() *translate.Output { return c.report.Scanned() }

// responseBody translates the response, an error or a stream chunk.
func (c *chat) responseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	switch {
	case c.stream:
		return c.streamChunk(chunk, endOfStream), nil
	case c.status/100 != 2:
		return errorBody(c.status, chunk), nil
	}
	return c.completion(chunk)
}

// Usage implements translate.Translator: the usage the answer reported,
// with its web searches as Google bills them for the model that answered.
func (c *chat) Usage() translate.Usage {
	u := c.usage
	version := c.version
	if c.stream {
		version = c.st.model
	}
	u.WebSearchRequests = c.searches.billed(version, c.target.Model)
	return u
}

// responseIn is a GenerateContentResponse.
type responseIn struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text             string        `json:"text"`
				Thought          bool          `json:"thought"`
				FunctionCall     *functionCall `json:"functionCall"`
				ThoughtSignature string        `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason      string             `json:"finishReason"`
		Index             int                `json:"index"`
		GroundingMetadata *groundingMetadata `json:"groundingMetadata"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
		TotalTokenCount         int64 `json:"totalTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
}

// groundingMetadata is what Google Search grounding found: the web pages
// (chunks) and which bytes of the answer's text each supports.
type groundingMetadata struct {
	// WebSearchQueries are the queries the model searched Google for.
	WebSearchQueries []string `json:"webSearchQueries"`
	GroundingChunks  []struct {
		Web *struct {
			URI   string `json:"uri"`
			Title string `json:"title"`
		} `json:"web"`
	} `json:"groundingChunks"`
	GroundingSupports []struct {
		Segment struct {
			StartIndex int `json:"startIndex"`
			EndIndex   int `json:"endIndex"`
		} `json:"segment"`
		GroundingChunkIndices []int `json:"groundingChunkIndices"`
	} `json:"groundingSupports"`
}

// annotations are the url_citation annotations of grounding on text: a
// segment's byte offsets become code point indices of text, one
// annotation per web page that supports it. Offsets out of text are
// clamped; chunks that are no web page are left out.
func (g *groundingMetadata) annotations(text string) []api.Annotation {
	if g == nil {
		return nil
	}
	var out []api.Annotation
	at := func(offset int) int { return utf8.RuneCountInString(text[:max(0, min(offset, len(text)))]) }
	for _, s := range g.GroundingSupports {
		for _, i := range s.GroundingChunkIndices {
			if i < 0 || i >= len(g.GroundingChunks) || g.GroundingChunks[i].Web == nil || g.GroundingChunks[i].Web.URI == "" {
				continue
			}
			web := g.GroundingChunks[i].Web
			out = append(out, api.URLCitation(at(s.Segment.StartIndex), at(s.Segment.EndIndex), web.URI, web.Title))
		}
	}
	return out
}

func (r *responseIn) usage() (translate.Usage, bool) {
	m := r.UsageMetadata
	if m == nil {
		return translate.Usage{}, false
	}
	completion := m.CandidatesTokenCount + m.ThoughtsTokenCount
	return translate.Usage{PromptTokens: m.PromptTokenCount, CompletionTokens: completion,
		TotalTokens: m.PromptTokenCount + completion, CachedTokens: m.CachedContentTokenCount, ReasoningTokens: m.ThoughtsTokenCount}, true
}

// finishReason maps Gemini's (and Vertex AI's) finishReason; calls make
// it tool_calls. Every reason a safety, policy or recitation filter ends
// an answer with is content_filter, so a blocked answer never looks like
// an empty normal one; reasons OpenAI has no word for (LANGUAGE, OTHER, a
// malformed or unexpected function call, NO_IMAGE) are stop.
func finishReason(reason string, calledTools bool) string {
	switch reason {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MODEL_ARMOR",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return "content_filter"
	}
	if calledTools {
		return "tool_calls"
	}
	return "stop"
}

// toolCall maps a functionCall. Gemini 3 wants the call's thought
// signature back with it on the next turn; OpenAI clients echo only the
// tool call id, so a signature travels inside the id.
func toolCall(fc *functionCall, signature string, n int) api.ToolCall {
	tc := api.ToolCall{ID: fc.ID, Type: "function"}
	switch {
	case signature != "":
		tc.ID = signatureID(signature)
	case tc.ID == "":
		tc.ID = "call_" + strconv.Itoa(n)
	}
	tc.Function.Name, tc.Function.Arguments = fc.Name, compactJSON(fc.Args)
	return tc
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil {
		return "{}"
	}
	return b.String()
}

// completion turns a GenerateContentResponse into a chat.completion. A
// body that is none (not a JSON object, neither candidates nor usage,
// candidates that are not objects) is an error wrapping
// translate.ErrUpstream.
func (c *chat) completion(body []byte) ([]byte, error) {
	var r responseIn
	if err := api.DecodeUpstream(body, &r, "GenerateContentResponse"); err != nil {
		return nil, err
	}
	if r.Candidates == nil && r.UsageMetadata == nil {
		return nil, api.Unusable("the provider's GenerateContentResponse has neither candidates nor usage")
	}
	var shape struct {
		Candidates json.RawMessage `json:"candidates"`
	}
	json.Unmarshal(body, &shape) //nolint:errcheck // decoded above
	if r.Candidates != nil && !api.ObjectArray(shape.Candidates) {
		return nil, api.Unusable("the provider's candidates are not all objects")
	}
	c.usage, _ = r.usage()
	c.version = r.ModelVersion
	for _, cand := range r.Candidates {
		c.searches.add(cand.GroundingMetadata)
	}
	choices := []api.Choice{}
	calls := 0
	for _, cand := range r.Candidates {
		msg := api.Message{Role: "assistant"}
		var text, reasoning strings.Builder
		for _, p := range cand.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				msg.ToolCalls = append(msg.ToolCalls, toolCall(p.FunctionCall, p.ThoughtSignature, calls))
				calls++
			case p.Thought:
				reasoning.WriteString(p.Text)
			default:
				text.WriteString(p.Text)
			}
		}
		msg.SetText(text.String(), reasoning.String())
		msg.Annotations = cand.GroundingMetadata.annotations(text.String())
		choices = append(choices, api.Choice{Index: cand.Index, Message: msg, FinishReason: finishReason(cand.FinishReason, len(msg.ToolCalls) > 0)})
	}
	cc := api.NewChatCompletion(r.ResponseID, c.req.Model, c.created) // the client's model, not the modelVersion
	cc.Choices, cc.Usage = choices, api.ChatUsage(c.usage)
	out, err := json.Marshal(cc)
	return out, api.AsUnusable(err)
}

// errorBody normalizes {"error":{"code","message","status"}}. A rejected
// credential is the gateway's problem, and its message is not passed on.
func errorBody(status int, body []byte) []byte {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		return api.NormalizeError(status, body)
	}
	msg, typ := api.ProviderMessage(status, e.Error.Message), "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		msg, typ = "The provider rejected the gateway's credentials for this backend.", "server_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	return api.MarshalError(api.ErrorObject{Message: msg, Type: typ, Code: api.Nullable(strings.ToLower(e.Error.Status))})
}

// signaturePrefix marks tool call ids that carry a thought signature.
const signaturePrefix = "gts_"

func signatureID(signature string) string {
	raw, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return signaturePrefix + base64.RawURLEncoding.EncodeToString([]byte(signature))
	}
	return signaturePrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// signatureFromID recovers the thought signature a tool call id carries.
func signatureFromID(id string) string {
	enc, ok := strings.CutPrefix(id, signaturePrefix)
	if !ok {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(raw)
}

var _ translate.Reporter = (*chat)(nil)
