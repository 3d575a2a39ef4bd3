package extproc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
	"modelgate/envoy/routing"
	"modelgate/ratelimit"
	"modelgate/ratelimit/memory"
	"modelgate/translate"
)

// chargingLimiter is a memory limiter that keeps what each exchange
// reserved and was charged.
type chargingLimiter struct {
	ratelimit.Limiter
	mu                sync.Mutex
	reserved, charged int64
}

func (c *chargingLimiter) Admit(ctx context.Context, rules []ratelimit.Rule, reserve int64) (ratelimit.Decision, error) {
	c.mu.Lock()
	c.reserved += reserve
	c.mu.Unlock()
	return c.Limiter.Admit(ctx, rules, reserve)
}

func (c *chargingLimiter) Charge(ctx context.Context, rules []ratelimit.Rule, tokens int64) error {
	c.mu.Lock()
	c.charged += tokens
	c.mu.Unlock()
	return c.Limiter.Charge(ctx, rules, tokens)
}

// newUsageServer serves the model m from one backend of provider, with
// log, metrics, a token rate limit, a price and a usage log.
func newUsageServer(t *testing.T, provider string, log *zap.Logger) (*Server, *usageLog, *Metrics, *chargingLimiter) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	prices, err := pricing.NewTable([]pricing.Price{{Model: "m", Input: 3 * pricing.NanosPerUnit, Output: 15 * pricing.NanosPerUnit}})
	if err != nil {
		t.Fatal(err)
	}
	tpm := int64(1_000_000)
	lim := &chargingLimiter{Limiter: memory.New(memory.Config{})}
	usage := &usageLog{}
	s, err := New(Config{Logger: log, Metrics: m, Prices: prices, Limiter: lim, AccountLimits: authz.Limits{TokensPerMinute: &tpm},
		Routing: routing.Table{Backends: []routing.Backend{{Name: "b", Provider: provider}},
			Models: []routing.Model{{ID: "m", Deployments: []routing.Deployment{{Backend: "b", Model: "up"}}}}},
		Credentials: map[string]Credentials{"b": {APIKey: "provider-key"}}}, stubAuth{}, usage)
	if err != nil {
		t.Fatal(err)
	}
	return s, usage, m, lim
}

// tokensCounted is the value of m's token counter of a provider's chat
// completions of the model m, by type.
func tokensCounted(t *testing.T, m *Metrics, provider, typ string) float64 {
	t.Helper()
	var pm dto.Metric
	if err := m.tokens.WithLabelValues("chat.completions", provider, "m", typ).Write(&pm); err != nil {
		t.Fatal(err)
	}
	return pm.GetCounter().GetValue()
}

const (
	minInt64 = "-9223372036854775808"
	maxInt64 = "9223372036854775807"
	pow62    = "4611686018427387904"
	pow61    = "2305843009213693952"
)

func openAIAnswer(usage string) string {
	return `{"id":"c","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"Paris is the capital of France."},"finish_reason":"stop"}],"usage":` + usage + `}`
}

func openAIStream(usage string) []string {
	return []string{
		string(openAIChunk(false)("Paris is the capital of France.", 1)),
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":` + usage + "}\n\ndata: [DONE]\n\n",
	}
}

func geminiAnswer(usage string) string {
	return `{"candidates":[{"content":{"parts":[{"text":"Paris is the capital of France."}],"role":"model"},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":` + usage + `,"modelVersion":"up"}`
}

func anthropicAnswer(usage string) string {
	return `{"id":"msg_1","type":"message","role":"assistant","model":"up","content":[{"type":"text","text":"Paris is the capital of France."}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":` + usage + `}`
}

func anthropicStream(start, delta string) []string {
	return []string{
		string(sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"up","content":[],"stop_reason":null,"usage":`+start+`}}`)),
		string(sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)),
		string(sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Paris is the capital of France."}}`)),
		string(sseEvent("content_block_stop", `{"type":"content_block_stop","index":0}`)),
		string(sseEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":`+delta+`}`)),
		string(sseEvent("message_stop", `{"type":"message_stop"}`)),
	}
}

// usageBound is the most any count of a record may be: 2^32.
const usageBound = translate.MaxUsageCount

// A provider's usage the gateway cannot believe (negative counts, counts
// near 2^63, parts larger than their whole) neither panics nor loses the
// request's record: every sink (the ledger, the metrics, the rate limits,
// the cost, Envoy's metadata) gets the same counts, each in [0, 2^32],
// consistent with each other.
func TestUnbelievableUsage(t *testing.T) {
	t.Parallel()
	type want struct {
		prompt, completion, total, cached, reasoning int64
		estimated                                    bool // then the counts are the gateway's estimates
	}
	top := int64(usageBound)
	for _, tt := range []struct {
		name, provider string
		stream         bool
		answer         []string
		status         int
		want           want
	}{
		{"openai believable", "openai", false,
			[]string{openAIAnswer(`{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":4}}`)},
			200, want{prompt: 12, completion: 9, total: 21, cached: 4}},
		{"openai negative", "openai", false,
			[]string{openAIAnswer(`{"prompt_tokens":-5,"completion_tokens":` + minInt64 + `,"total_tokens":-1}`)}, 200, want{estimated: true}},
		{"openai negative completion only", "openai", false,
			[]string{openAIAnswer(`{"prompt_tokens":12,"completion_tokens":-9,"total_tokens":3}`)}, 200, want{prompt: 12, total: 12}},
		{"openai 2^62", "openai", false,
			[]string{openAIAnswer(`{"prompt_tokens":` + pow62 + `,"completion_tokens":` + pow62 + `,"total_tokens":` + maxInt64 +
				`,"prompt_tokens_details":{"cached_tokens":` + maxInt64 + `},"completion_tokens_details":{"reasoning_tokens":` + maxInt64 + `}}`)},
			200, want{prompt: top, completion: top, total: 2 * top, cached: top, reasoning: top}},
		{"openai parts over their whole", "openai", false,
			[]string{openAIAnswer(`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":3,` +
				`"prompt_tokens_details":{"cached_tokens":50},"completion_tokens_details":{"reasoning_tokens":20}}`)},
			200, want{prompt: 10, completion: 5, total: 15, cached: 10, reasoning: 5}},
		{"openai float counts", "openai", false,
			[]string{openAIAnswer(`{"prompt_tokens":1.5,"completion_tokens":1e3,"total_tokens":-0.5}`)}, 502, want{estimated: true}},
		{"openai stream float counts", "openai", true,
			openAIStream(`{"prompt_tokens":1.5,"completion_tokens":1e3,"total_tokens":-0.5}`), 200, want{estimated: true}},
		{"openai stream negative", "openai", true,
			openAIStream(`{"prompt_tokens":-5,"completion_tokens":` + minInt64 + `,"total_tokens":` + minInt64 + `}`), 200, want{estimated: true}},
		{"openai stream MinInt64 prompt", "openai", true,
			openAIStream(`{"prompt_tokens":` + minInt64 + `,"completion_tokens":7,"total_tokens":` + maxInt64 + `}`), 200,
			want{completion: 7, total: 7}},
		{"openai stream 2^62", "openai", true,
			openAIStream(`{"prompt_tokens":` + pow62 + `,"completion_tokens":` + pow62 + `,"total_tokens":` + minInt64 + `}`), 200,
			want{prompt: top, completion: top, total: 2 * top}},
		{"gemini negative", "gemini", false,
			[]string{geminiAnswer(`{"promptTokenCount":-7,"candidatesTokenCount":-3,"thoughtsTokenCount":-1,"totalTokenCount":-11}`)},
			200, want{estimated: true}},
		{"gemini stream negative", "gemini", true,
			[]string{`data: ` + geminiAnswer(`{"promptTokenCount":-7,"candidatesTokenCount":-3,"totalTokenCount":-10}`) + "\r\n\r\n"},
			200, want{estimated: true}},
		{"gemini 2^62", "gemini", false,
			[]string{geminiAnswer(`{"promptTokenCount":` + pow62 + `,"candidatesTokenCount":` + pow61 + `,"thoughtsTokenCount":` + pow61 + `}`)},
			200, want{prompt: top, completion: top, total: 2 * top, reasoning: top}},
		{"anthropic negative", "anthropic", false,
			[]string{anthropicAnswer(`{"input_tokens":-25,"output_tokens":` + minInt64 + `}`)}, 200, want{estimated: true}},
		{"anthropic negative cache reads", "anthropic", false,
			[]string{anthropicAnswer(`{"input_tokens":25,"output_tokens":9,"cache_read_input_tokens":-20,"cache_creation_input_tokens":-4}`)},
			200, want{prompt: 1, completion: 9, total: 10}},
		{"anthropic stream negative", "anthropic", true,
			anthropicStream(`{"input_tokens":-25,"output_tokens":1}`, `{"output_tokens":`+minInt64+`}`), 200, want{estimated: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zap.WarnLevel)
			s, usage, m, lim := newUsageServer(t, tt.provider, zap.New(core))
			contentType := "application/json"
			body := `{"model":"m","messages":[{"role":"user","content":"What is the capital of France?"}]}`
			if tt.stream {
				contentType = "text/event-stream"
				body = `{"model":"m","messages":[{"role":"user","content":"What is the capital of France?"}],"stream":true}`
			}
			msgs := []*extprocv3.ProcessingRequest{reqHeaders(), reqBody(body), respHeaders(false, ":status", "200", "content-type", contentType)}
			for i, a := range tt.answer {
				msgs = append(msgs, respBody(a, i == len(tt.answer)-1))
			}
			out := play(t, s, false, msgs...)

			var pm dto.Metric
			if err := m.panics.Write(&pm); err != nil || pm.GetCounter().GetValue() != 0 {
				t.Fatalf("%v panics", pm.GetCounter().GetValue())
			}
			rec := usage.only(t)
			if rec.Status != tt.status {
				t.Errorf("status %d, want %d", rec.Status, tt.status)
			}
			got := want{rec.PromptTokens, rec.CompletionTokens, rec.TotalTokens, rec.CachedTokens, rec.ReasoningTokens, rec.Estimated}
			if tt.want.estimated {
				answered := tt.status == 200 // the client got the text: its completion is estimated too
				if !rec.Estimated || rec.PromptTokens <= 0 || answered && rec.CompletionTokens <= 0 ||
					rec.TotalTokens != rec.PromptTokens+rec.CompletionTokens {
					t.Errorf("record %+v: want the estimated prompt and completion", rec)
				}
			} else if got != tt.want {
				t.Errorf("record counts %+v, want %+v", got, tt.want)
			}
			checkSane(t, rec)
			warned := logs.FilterMessage("provider usage out of range").Len()
			// The provider's usage is believable, or none: counts that are not
			// integers fail the answer (502) or its usage chunk.
			quiet := map[string]bool{"openai believable": true, "openai float counts": true, "openai stream float counts": true}[tt.name]
			if quiet && warned != 0 || !quiet && warned != 1 {
				t.Errorf("%d warnings of the provider's usage", warned)
			}

			if in, outTokens := tokensCounted(t, m, tt.provider, "input"), tokensCounted(t, m, tt.provider, "output"); in != float64(rec.PromptTokens) || outTokens != float64(rec.CompletionTokens) {
				t.Errorf("metrics counted %v input and %v output tokens, the record %d and %d", in, outTokens, rec.PromptTokens, rec.CompletionTokens)
			}
			lim.mu.Lock()
			used := lim.reserved + lim.charged
			lim.mu.Unlock()
			if used != rec.TotalTokens {
				t.Errorf("the rate limits were charged %d tokens, the record %d", used, rec.TotalTokens)
			}
			p, _ := s.cfg.Prices.At("m", time.Now())
			if cost, _ := p.Cost(pricing.Usage{PromptTokens: rec.PromptTokens, CompletionTokens: rec.CompletionTokens,
				CachedTokens: rec.CachedTokens, ReasoningTokens: rec.ReasoningTokens}); !rec.CostKnown || rec.Cost != cost || rec.Cost < 0 {
				t.Errorf("cost %v (known %v), want %v", rec.Cost, rec.CostKnown, cost)
			}
			md := out[len(out)-1].GetDynamicMetadata().GetFields()["io.modelgate"].GetStructValue().GetFields()
			for _, k := range []string{"prompt_tokens", "completion_tokens", "total_tokens"} {
				if v := md[k].GetNumberValue(); v < 0 || v > 2*usageBound {
					t.Errorf("metadata %s = %v", k, v)
				}
			}
		})
	}
}

// checkSane checks a record's counts against the guard's rules.
func checkSane(t *testing.T, rec ledger.UsageRecord) {
	t.Helper()
	for name, n := range map[string]int64{"prompt": rec.PromptTokens, "completion": rec.CompletionTokens,
		"cached": rec.CachedTokens, "cache write": rec.CacheWriteTokens, "cache write 1h": rec.CacheWrite1hTokens,
		"reasoning": rec.ReasoningTokens, "images": rec.Images} {
		if n < 0 || n > usageBound {
			t.Errorf("%s tokens %d, out of [0, 2^32]", name, n)
		}
	}
	if rec.TotalTokens < rec.PromptTokens+rec.CompletionTokens || rec.TotalTokens > 2*usageBound {
		t.Errorf("total %d for %d prompt and %d completion tokens", rec.TotalTokens, rec.PromptTokens, rec.CompletionTokens)
	}
	if rec.CachedTokens+rec.CacheWriteTokens > rec.PromptTokens || rec.CacheWrite1hTokens > rec.CacheWriteTokens ||
		rec.ReasoningTokens > rec.CompletionTokens {
		t.Errorf("record %s: parts over their whole", fmt.Sprintf("%+v", rec))
	}
}
