package bedrock

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"modelgate/translate"
	"modelgate/translate/api"
)

type chat struct {
	report  translate.Output // what the last ResponseBody returned
	target  translate.Target
	req     *api.ChatRequest
	now     func() time.Time
	status  int
	stream  bool
	created int64
	id      string
	usage   translate.Usage
	dec     Decoder
	tools   map[int]int // content block index → tool_calls index
	stopped bool        // messageStop arrived
	done    bool
	// jsonMode: a JSON response_format is answered by the json_response
	// tool, whose input becomes the message content.
	jsonMode  bool
	jsonBlock int // the json tool's block index + 1 while streaming
	// thinking gathers the reasoning block being streamed; it goes out
	// whole, signed, when the block stops.
	thinking  api.ThinkingGatherer
	scratch   []byte          // a decoded reasoning delta, see jsonscan.Unquote
	deltas    api.DeltaChunks // writes the fast path's chunks
	maxTokens int64           // inferenceConfig.maxTokens sent, zero for none
}

// NewChat returns the chat translator for provider bedrock. A Bedrock API
// key is sent as a bearer token; without one, AWS credentials sign the
// request with SigV4.
// What the request asks of the answer (a JSON response_format answered
// by a tool, the maxTokens sent) is settled here, so RequestBody changes
// nothing.
func NewChat(t translate.Target, req *api.ChatRequest) translate.Translator {
	p := req.AnswerParams()
	c := &chat{target: t, req: req, now: time.Now, jsonMode: p.JSON()}
	if mt := sentMaxTokens(t.Model, p.MaxTokens, p.ReasoningEffort); mt != nil {
		c.maxTokens = *mt
	}
	return c
}

// Usage implements translate.Translator.
func (c *chat) Usage() translate.Usage { return c.usage }

// MaxOutputTokens implements translate.OutputBound: a thinking budget
// raises maxTokens above the client's bound.
func (c *chat) MaxOutputTokens() int64 { return c.maxTokens }

// RequestBody builds the Converse or ConverseStream request.
func (c *chat) RequestBody() (translate.Upstream, error) {
	r, err := buildRequest(c.target.Model, c.req, c.target.AutoCache)
	if err != nil {
		return translate.Upstream{}, err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return translate.Upstream{}, err
	}
	op := "converse"
	if c.req.Stream {
		op = "converse-stream"
	}
	return upstream(c.target, op, body, c.now()), nil
}

// upstream addresses the model's operation (converse, converse-stream,
// invoke) and authenticates the request: a Bedrock API key is sent as a
// bearer token; without one, AWS credentials sign it with SigV4.
func upstream(t translate.Target, op string, body []byte, now time.Time) translate.Upstream {
	// Model ids such as us.amazon.nova-micro-v1:0 carry a colon that
	// Bedrock expects percent-encoded.
	path := t.BasePath + "/model/" + strings.ReplaceAll(strings.ReplaceAll(t.Model, "/", "%2F"), ":", "%3A") + "/" + op
	headers := []translate.Header{{Name: "content-type", Value: "application/json"}}
	switch {
	case t.APIKey != "":
		headers = append(headers, translate.Header{Name: "authorization", Value: "Bearer " + t.APIKey})
	case t.AWS.AccessKeyID != "":
		headers = append(headers, Sign(t.AWS, region(t), "POST", t.Host, path, "application/json", body, now)...)
	}
	return translate.Upstream{Body: body, Path: path, Headers: headers}
}

// region is the configured one, or the one in bedrock-runtime.<region>.amazonaws.com.
func region(t translate.Target) string {
	if t.Region != "" {
		return t.Region
	}
	host, _, _ := strings.Cut(t.Host, ":")
	if rest, ok := strings.CutPrefix(host, "bedrock-runtime."); ok {
		region, _, _ := strings.Cut(rest, ".")
		return region
	}
	return "us-east-1"
}

// ResponseHeaders streams successful event streams.
func (c *chat) ResponseHeaders(status int, contentType string) translate.Head {
	c.status, c.created = status, c.now().Unix()
	c.id = "chatcmpl-bedrock-" + strconv.FormatInt(c.now().UnixNano(), 36)
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case status/100 == 2 && mt == "application/vnd.amazon.eventstream":
		c.stream = true
		return translate.Head{Status: status, ContentType: "text/event-stream; charset=utf-8", Stream: true}
	case status/100 == 2:
		return translate.Head{Status: status, ContentType: "application/json"}
	}
	return translate.Head{Status: clientStatus(status), ContentType: "application/json"}
}

// clientStatus maps Bedrock's statuses: a refused credential (403) or a
// failing model (424) is the gateway's upstream failure.
func clientStatus(status int) int {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusFailedDependency:
		return http.StatusBadGateway
	}
	return status
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

func errorBody(status int, body []byte) []byte {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil || e.Message == "" {
		return api.NormalizeError(clientStatus(status), body)
	}
	msg := e.Message
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		msg = "The provider rejected the gateway's credentials for this backend."
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg}})
	return api.NormalizeError(clientStatus(status), b)
}

type usageIn struct {
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	// CacheDetails splits the cache writes by their ttl (5m, 1h).
	CacheDetails []struct {
		TTL         string `json:"ttl"`
		InputTokens int64  `json:"inputTokens"`
	} `json:"cacheDetails"`
}

// normalize counts cache reads and writes as prompt tokens, as Bedrock's
// totalTokens does and OpenAI's prompt_tokens includes cached tokens:
// inputTokens are only the tokens after the last cache point.
func (u usageIn) normalize() translate.Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
	out := translate.Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens,
		CachedTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheWriteInputTokens}
	for _, d := range u.CacheDetails {
		if d.TTL == "1h" {
			out.CacheWrite1hTokens += d.InputTokens
		}
	}
	out.CacheWrite1hTokens = min(out.CacheWrite1hTokens, out.CacheWriteTokens)
	return out
}

// finishReason maps stopReason; a call of the JSON answer's tool alone is
// a normal stop. called says whether the client's tools were called.
func (c *chat) finishReason(stop string, called bool) string {
	if c.jsonMode && stop == "tool_use" && !called {
		return "stop"
	}
	return finishReason(stop)
}

func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "guardrail_intervened", "content_filtered":
		return "content_filter"
	}
	return "stop"
}

// completion turns a Converse response into a chat.completion. A body
// that is none (not a JSON object, no output message, content blocks that
// are not objects) is an error wrapping translate.ErrUpstream.
func (c *chat) completion(body []byte) ([]byte, error) {
	var r struct {
		Output *struct {
			Message *struct {
				Content []*struct {
					Text             string            `json:"text"`
					ToolUse          *toolUse          `json:"toolUse"`
					ReasoningContent *reasoningContent `json:"reasoningContent"`
				} `json:"content"`
			} `json:"message"`
		} `json:"output"`
		StopReason string  `json:"stopReason"`
		Usage      usageIn `json:"usage"`
	}
	if err := api.DecodeUpstream(body, &r, "Converse response"); err != nil {
		return nil, err
	}
	if r.Output == nil || r.Output.Message == nil {
		return nil, api.Unusable("the provider's Converse response has no output message")
	}
	c.usage = r.Usage.normalize()
	msg := api.Message{Role: "assistant"}
	var text, reasoning strings.Builder
	for _, b := range r.Output.Message.Content {
		if b == nil {
			return nil, api.Unusable("the provider's Converse response has a content block that is not an object")
		}
		switch {
		case b.ToolUse != nil && c.jsonMode && b.ToolUse.Name == jsonTool:
			text.WriteString(compact(b.ToolUse.Input))
		case b.ToolUse != nil && b.ToolUse.Type == serverToolUse:
		case b.ToolUse != nil:
			msg.ToolCalls = append(msg.ToolCalls, api.NewToolCall(nil, b.ToolUse.ToolUseID, b.ToolUse.Name, compact(b.ToolUse.Input)))
		case b.ReasoningContent != nil && b.ReasoningContent.ReasoningText != nil:
			rt := b.ReasoningContent.ReasoningText
			reasoning.WriteString(rt.Text)
			msg.ThinkingBlocks = append(msg.ThinkingBlocks, api.ThinkingBlock{Type: "thinking", Thinking: rt.Text, Signature: rt.Signature})
		case b.ReasoningContent != nil && b.ReasoningContent.RedactedContent != "":
			msg.ThinkingBlocks = append(msg.ThinkingBlocks, api.ThinkingBlock{Type: "redacted_thinking", Data: b.ReasoningContent.RedactedContent})
		case b.ReasoningContent != nil:
		default:
			text.WriteString(b.Text)
		}
	}
	msg.SetText(text.String(), reasoning.String())
	cc := api.NewChatCompletion(c.id, c.req.Model, c.created) // the client's model, not Bedrock's id
	cc.Choices[0].Message, cc.Choices[0].FinishReason, cc.Usage = msg, c.finishReason(r.StopReason, len(msg.ToolCalls) > 0), api.ChatUsage(c.usage)
	out, err := json.Marshal(cc)
	return out, api.AsUnusable(err)
}

func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

var _ translate.Reporter = (*chat)(nil)
