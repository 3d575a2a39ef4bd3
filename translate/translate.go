// Package translate holds the contract between the ext_proc server and the
// pure, per-provider translators in its subpackages.
//
// A Translator handles one exchange (one client request) for one endpoint and
// one provider. It is built with the already validated client request, and
// its constructor settles all it keeps of the request for the answer (a JSON
// response format answered by a tool, the bound on the answer sent), so that
// RequestBody is pure: it may be called again, giving the same request, or
// never (the router-level stream of a Fallback model builds a translator for
// the answer of a deployment whose request an attempt sent). The answer is
// translated in order: ResponseHeaders once, then ResponseBody once per
// upstream body chunk (exactly once, with the whole body, for buffered
// responses). Translators do no I/O, start no goroutines and are not safe for
// concurrent use.
package translate

import "errors"

// ErrUpstream marks a provider answer the translator cannot use: an empty
// or non-JSON body where JSON was due, or JSON of the wrong shape. The
// gateway answers such a response with 502 server_error. Translators wrap
// it (fmt.Errorf("...: %w", translate.ErrUpstream)); the wrapped text is
// for logs and never reaches the client.
var ErrUpstream = errors.New("unusable upstream response")

// Target is the deployment a request was routed to.
type Target struct {
	// Backend is the configured backend name (the Envoy cluster).
	Backend string
	// Provider is the backend's provider kind, such as "openai".
	Provider string
	// Model is the upstream model name sent to the provider.
	Model string
	// WebSearch: the operator lets the model search the web with the
	// provider's own search when the client asks for it.
	WebSearch bool
	// AutoCache: the operator has the gateway place prompt caching
	// breakpoints on a request whose client placed none
	// (api.ChatParams.PlaceCacheMarkers), for providers that cache at
	// markers only (Anthropic, Claude on Vertex AI, Bedrock).
	AutoCache bool
	// BasePath is the path of the backend's base URL without a trailing
	// slash ("" for https://api.openai.com, "/openai" for Groq). Endpoint
	// paths such as /v1/chat/completions are appended to it.
	BasePath string
	// APIKey is the provider credential. It is never the client's key.
	APIKey string
	// APIVersion is the provider's API version where it takes one in the
	// request (Azure OpenAI's api-version); empty uses the translator's
	// default.
	APIVersion string
	// Host is the upstream host as Envoy sends it (with a non-default
	// port), for request signatures.
	Host string
	// Region is the provider region where requests are signed for one
	// (AWS); empty lets the translator derive it from Host.
	Region string
	// AWS holds AWS credentials; translators that sign with SigV4 use them
	// when APIKey is empty.
	AWS AWSCredentials
	// Project is the Google Cloud project of a Vertex AI backend.
	Project string
}

// AWSCredentials are AWS credentials for SigV4 signing.
type AWSCredentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// Upstream is a translated request, ready to be sent to the provider.
type Upstream struct {
	// Body replaces the client's request body.
	Body []byte
	// Path is the upstream :path, including BasePath.
	Path string
	// Headers are set on the upstream request (lower-case names), including
	// the provider credential.
	Headers []Header
}

// Header is one upstream request header.
type Header struct {
	Name, Value string
}

// Head is what the client is told about the response before its body.
type Head struct {
	// Status is the client-facing HTTP status.
	Status int
	// ContentType is the client-facing content type.
	ContentType string
	// Stream reports that the body is processed chunk by chunk (SSE) rather
	// than buffered whole.
	Stream bool
	// Warning, when set, tells the client what the translation left out
	// of its request (tools the provider cannot run); the gateway sends
	// it in the WarningHeader response header.
	Warning string
}

// WarningHeader is the response header that carries Head.Warning.
const WarningHeader = "x-modelgate-warning"

// Usage is the normalized usage of one exchange. Zero means the provider
// did not report that count. A translator's Usage is the provider's word,
// which the gateway takes only through Sane.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
	CachedTokens     int64
	// CacheWriteTokens are the prompt tokens the provider wrote to its
	// prompt cache (Anthropic's cache creation, Bedrock's cache writes).
	CacheWriteTokens int64
	// CacheWrite1hTokens are the cache writes that live for an hour
	// (Anthropic's and Bedrock's 1h ttl), priced apart; the rest of
	// CacheWriteTokens live five minutes.
	CacheWrite1hTokens int64
	ReasoningTokens    int64
	// AudioSeconds is the seconds of audio a transcription processed, as
	// the provider's answer states them (its duration usage, else the
	// verbose answer's duration); zero when the answer does not say.
	AudioSeconds float64
	// Images is the number of images an image generation returned to the
	// client: the items of the answer's data array.
	Images int64
	// WebSearchRequests is the number of web searches the provider ran
	// for the answer and bills apart from tokens: Anthropic's
	// server_tool_use.web_search_requests, OpenAI's web_search_call items
	// that searched, Gemini's grounded queries (see its translator).
	WebSearchRequests int64
	// Partial reports a stream the provider ended before its end: broken
	// off, or ended by an error event. The counts are what it reported on
	// the way (Anthropic's output_tokens 1 at message_start), not the
	// answer's: the gateway charges its estimate instead.
	Partial bool `json:",omitempty"`
}

// MaxUsageCount bounds every count of a sane Usage (its tokens and
// images; TotalTokens, their sum, is at most twice it). At 2^32, about
// 4.3 billion, it is hundreds of times any real request (the largest
// context windows hold ten million tokens), so it cuts no real count;
// and it keeps the ledger's sums of any real number of records exact,
// below 2^63: a billion records of the largest counts, totals included,
// still fit an int64 (past it, the stores' sums saturate).
const MaxUsageCount = 1 << 32

// MaxAudioSeconds bounds AudioSeconds of a sane Usage: 2^24 seconds,
// about 194 days of audio, far above any transcription a provider takes
// (OpenAI's take files of 25 MB), and a number of milliseconds, as the
// ledger counts audio, that no sum of it overflows.
const MaxAudioSeconds = 1 << 24

// Sane is u as the gateway believes it, whatever the provider sent: the
// counts a provider (or a hostile server an operator configured) may
// state negative, near 2^63, or out of step with each other. Every
// consumer of usage (ledger, metrics, rate limits, prices, budgets,
// Envoy's metadata, traces and logs) takes this, never a translator's
// Usage as it is:
//
//   - a negative count is zero, as one not reported; a count above
//     MaxUsageCount is MaxUsageCount;
//   - the whole is believed over its parts, as prices count them:
//     CachedTokens are at most PromptTokens, CacheWriteTokens at most the
//     prompt tokens not read from the cache, CacheWrite1hTokens at most
//     CacheWriteTokens, ReasoningTokens at most CompletionTokens;
//   - TotalTokens is PromptTokens + CompletionTokens, whatever the
//     provider's total said: the parts are what is priced, so the rate
//     limits and the ledger count the same tokens (and a sum a translator
//     took past 2^63, wrapped below zero, is counted right);
//   - AudioSeconds that are NaN or not above zero are zero, and more
//     than MaxAudioSeconds (+Inf too) are MaxAudioSeconds.
//
// Sane of a sane Usage is that Usage: it may be applied again.
func (u Usage) Sane() Usage {
	u.PromptTokens = saneCount(u.PromptTokens)
	u.CompletionTokens = saneCount(u.CompletionTokens)
	u.CachedTokens = min(saneCount(u.CachedTokens), u.PromptTokens)
	u.CacheWriteTokens = min(saneCount(u.CacheWriteTokens), u.PromptTokens-u.CachedTokens)
	u.CacheWrite1hTokens = min(saneCount(u.CacheWrite1hTokens), u.CacheWriteTokens)
	u.ReasoningTokens = min(saneCount(u.ReasoningTokens), u.CompletionTokens)
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.Images, u.WebSearchRequests = saneCount(u.Images), saneCount(u.WebSearchRequests)
	switch s := u.AudioSeconds; {
	case !(s > 0): // NaN too
		u.AudioSeconds = 0
	case s > MaxAudioSeconds:
		u.AudioSeconds = MaxAudioSeconds
	}
	return u
}

func saneCount(n int64) int64 { return min(max(n, 0), MaxUsageCount) }

// StreamFailer is implemented by a translator whose client stream has an
// end of its own for a failure the gateway finds mid-stream: the
// Responses API's error event and response.failed, numbered in the
// stream's sequence. A chat stream ends with a chat error event instead.
type StreamFailer interface {
	// FailStream ends the client stream with message and code (an
	// OpenAI error code, such as server_error); nil when the stream has
	// not started or already ended.
	FailStream(message, code string) []byte
}

// OutputBound is implemented by a translator whose upstream request may
// bound the answer other than the client did: Anthropic requires
// max_tokens and is sent a default when the client sets none, and a
// thinking budget raises the bound. The gateway reserves tokens and
// budget for the bound the provider is sent, not the client's.
type OutputBound interface {
	// MaxOutputTokens is the bound on the answer the upstream request
	// carries; zero when it carries none.
	MaxOutputTokens() int64
}

// MaxOutputTokens is the bound tr's upstream request carries when tr is
// an OutputBound, else zero.
func MaxOutputTokens(tr Translator) int64 {
	if b, ok := tr.(OutputBound); ok {
		return b.MaxOutputTokens()
	}
	return 0
}

// Translator translates one exchange between the OpenAI API and a provider.
type Translator interface {
	// RequestBody returns the upstream request. It changes nothing in the
	// translator: called again, it gives the same request.
	RequestBody() (Upstream, error)
	// ResponseHeaders is told the upstream status and content type and
	// decides the client-facing head. It is called once.
	ResponseHeaders(status int, contentType string) Head
	// ResponseBody translates one piece of the upstream body into the bytes
	// that replace it for the client. For a buffered response it is called
	// once with the whole body and endOfStream true. For a stream it is
	// called per chunk; chunk edges are arbitrary, so partial events are
	// held back and flushed later. At endOfStream everything still held is
	// flushed. An error means the translator could not produce any output
	// for the client; the caller ends the exchange with a server error.
	ResponseBody(chunk []byte, endOfStream bool) ([]byte, error)
	// Usage returns the usage seen so far; complete after endOfStream.
	Usage() Usage
	// Reporter tells what the bytes the last ResponseBody call returned
	// carry: their generated text and finish reasons (report.go).
	Reporter
}
