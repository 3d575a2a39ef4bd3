package extproc

import (
	"context"
	"errors"
	"net/http"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/envoy/routing"
	"modelgate/ratelimit"
	"modelgate/translate"
	"modelgate/translate/providers"
)

// phase is what the exchange expects from Envoy next.
type phase int

const (
	phaseRequestHeaders phase = iota
	phaseRequestBody
	phaseResponseHeaders
	phaseResponseBody
	phaseDone
)

var phaseNames = [...]string{"request_headers", "request_body", "response_headers", "response_body", "done"}

func (p phase) String() string { return phaseNames[p] }

// exchange is the state of one stream: one client request and its
// response. Its parts each hold one concern: the request as the client
// sent it, what its endpoint adds, where it is routed, what the limits
// and budgets reserved, and the answer as the client gets it.
type exchange struct {
	stream
	meter   meter
	answer  answer
	span    exchangeSpan  // the trace span, and what it notes of the answer
	capture *captureState // the payload capture, nil without one
	// recorded: the outcome went to its sinks.
	recorded bool
}

// stream is what both kinds of ext_proc stream hold (exchange and
// attemptStream): the server, the log, the phase, the request as the
// client sent it, its endpoint's flow, where it is routed and its
// translator.
type stream struct {
	s     *Server
	log   exchangeLog
	phase phase
	start time.Time

	req   request
	flow  flow // what the endpoint does; nil for one the gateway answers itself
	route route
	tr    translate.Translator // nil until the request is routed
	book  bookkeeping
	// kind is the stream's own handling, which safeHandle guards.
	kind handler
}

// handler is what a kind of stream does with a message, and with one
// whose handling panicked.
type handler interface {
	handle(ctx context.Context, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error)
	afterPanic(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse
}

// safeHandle is handle with a recover boundary: a panic fails this request
// alone, with a logged and counted error, never the process.
func (st *stream) safeHandle(ctx context.Context, req *extprocv3.ProcessingRequest) (resp *extprocv3.ProcessingResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			st.s.cfg.Metrics.panicked()
			st.log.Error("panic while processing a message", zap.Any("panic", r), zap.Stack("stack"),
				zap.Stringer("phase", st.phase))
			resp, err = st.kind.afterPanic(req), nil
		}
	}()
	return st.kind.handle(ctx, req)
}

func (st *stream) server() *Server      { return st.s }
func (st *stream) request() *request    { return &st.req }
func (st *stream) logger() *exchangeLog { return &st.log }

// requestID is the gateway's id of the request, which the router-level
// stream's answers carry; an attempt's is empty.
func (st *stream) requestID() string { return st.req.id }

// request is what the exchange knows of the client's request.
type request struct {
	id          string // the gateway's id of the exchange (newRequestID)
	clientID    string // the x-request-id the request came with
	session     string // the agent session the client named (sessionID)
	endpoint    endpoint
	path        string // the client's :path
	contentType string // of the client's request body
	principal   *authz.Principal
	model       string // the public model id
	stream      bool   // the client asked for a stream
	prompt      int64  // estimated prompt tokens
	maxOutput   int64  // the bound on the answer the provider is sent: the client's or translator's; zero for none
	// warning names what the gateway left out of the request for the
	// model's configuration (api.LeftOut), joined with the translator's
	// warning in the answer's header.
	warning string
	// answers is how many answers the request asks for (chat's n, which
	// Gemini is sent as candidateCount): each is bounded by maxOutput, so
	// the reservation counts it that many times. Zero means one.
	answers int64
	// searches is the most web searches the request allows (a Messages
	// web search tool's max_uses), which budgets reserve; zero when it
	// sets no bound.
	searches int64
	// refusedModel: a model the principal may not use was refused,
	// recorded with its 403.
	refusedModel bool
	// dialect is the API the client speaks: its errors and model list
	// have that API's shape.
	dialect *dialect
}

// route is where the request goes.
type route struct {
	target   translate.Target
	provider providers.Provider // the target's provider
	timeouts routing.Timeouts   // the model's on its backend
	build    builder            // makes tr for a deployment (kept for a Fallback model's answer)
	via      forwarding         // direct, or through Envoy (a Fallback model)
}

// meter is the exchange's rate-limit and budget bookkeeping: what its
// admission reserved, settled once however the exchange ends.
type meter struct {
	s    *Server
	log  *exchangeLog
	book *bookkeeping // the exchange's, for the settlement

	rules    []ratelimit.Rule    // the principal's rate limit rules
	limit    *ratelimit.Decision // the admission, nil if none was made
	reserved int64               // tokens the admission reserved
	// rateSettled: rate limits charged and the concurrency slot freed.
	rateSettled bool

	budgets       []ratelimit.Budget // the principal's budgets, nil if none was admitted
	spendAt       time.Time          // when they were: the period the exchange settles in
	spendReserved int64              // what the admission reserved from them
	spendSettled  bool
}

// answer is the answer as the client gets it.
type answer struct {
	head   translate.Head
	status int // the client-facing status
	// mode is what becomes of the response body, chosen at the response
	// headers (or when the answer is cut).
	mode bodyMode
	// failure is the error the gateway answered with; nil when the
	// answer was the provider's (or Envoy's, envoyReply).
	failure    *APIError
	envoyReply *APIError // one of Envoy's own replies, as the client sees it
	delivery   delivery  // whether the request went to the provider
	at         answerTimes
	generated  int  // bytes of generated text the client got (translate.Output)
	completed  bool // the answer ended as it should
	body       bodyState
}

// bodyMode is what the exchange does with the response body's messages.
type bodyMode uint8

const (
	// bodyPass passes them on as they are: the answer to a request
	// never routed, or after the exchange was settled.
	bodyPass bodyMode = iota
	// bodyTranslate translates a buffered answer, whole.
	bodyTranslate
	// bodyStream translates a stream, chunk by chunk.
	bodyStream
	// bodyGather gathers a large buffered answer from a stream, and
	// translates it whole at its end.
	bodyGather
	// bodyEnvoyReply replaces one of Envoy's own replies with the
	// gateway's error (envoyReply).
	bodyEnvoyReply
	// bodyDropped drops them: a panic or a failure ended the stream.
	bodyDropped
)

// delivery is whether the request went to the provider.
type delivery uint8

const (
	unsent delivery = iota
	sent            // the request went
	// late: the reply to the request body came after Envoy's
	// message_timeout, which Envoy answered with a 504 of its own; the
	// request never went.
	late
)

// answerTimes are the times of the answer.
type answerTimes struct {
	sent      time.Time // when the request went
	firstByte time.Time // first streamed bytes to the client
	lastChunk time.Time // when the last streamed chunk came
}

// bodyState is what the body's mode keeps between messages.
type bodyState struct {
	chunk    *chunkReply // the reply to a streamed chunk, made once
	gathered []byte      // what arrived of a gathered answer
}

// bookkeeping is the context of the exchange's usage records and
// rate-limit charges (see exchange.bookkeeping).
type bookkeeping struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// context is the context of an exchange's usage records and rate-limit
// charges: it outlives the client, and timeout bounds it from its first
// use to the end of the exchange (done). One for all of them spares each
// a timer of its own.
func (b *bookkeeping) context(ctx context.Context, timeout time.Duration) context.Context {
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithTimeout(context.WithoutCancel(ctx), timeout)
	}
	return b.ctx
}

// done ends the bookkeeping context.
func (b *bookkeeping) done() {
	if b.cancel != nil {
		b.cancel()
	}
}

// bookkeeping is the stream's bookkeeping context (bookkeeping.context).
func (st *stream) bookkeeping(ctx context.Context) context.Context {
	return st.book.context(ctx, st.s.cfg.UsageTimeout)
}

// flow is what a request to one endpoint that reaches a provider does in
// the exchange: it parses the client's request and routes its model,
// builds the translator of a deployment, adds to the translated answer
// what the gateway adds, and tells prices what the request asked for.
type flow interface {
	// parse validates the client's body, routes the model it names
	// (parser.pick) and hands over what builds the translator
	// (parser.translator).
	// A request the gateway answers itself once it is parsed (a token
	// count it estimates) gives its answer instead.
	parse(ctx context.Context, st parser, body []byte) (*localAnswer, error)
	// answer is what the client gets of the translation of the answer's
	// body, or of one chunk of a stream.
	answer(ctx context.Context, ac answerContext, out []byte, eos bool) ([]byte, error)
	// price is u with what prices count of the request: the images it
	// asks for (when reserving) and their size and quality. (By value:
	// a pointer through the interface would put u on the heap.)
	price(u pricing.Usage, reserving bool) pricing.Usage
}

// parser is the stream a flow parses a request for: the router-level
// exchange, or an attempt of a Fallback model (attemptStream), which
// route the model each their own way.
type parser interface {
	server() *Server
	request() *request
	// pick routes the model the request names.
	pick(ctx context.Context, model string) error
	// translator makes the stream's translator with build (or, for a
	// Fallback model at the router level, keeps build for the answer).
	translator(build builder) error
}

// answerContext is what a flow sees of the exchange whose answer it adds
// to.
type answerContext struct {
	s       *Server
	account string         // the principal's account
	head    translate.Head // the answer's, as the client gets it
	log     *exchangeLog
}

// localAnswer is the gateway's own answer to a request it parsed, given
// without a provider: a count_tokens estimate, which its flow's parse
// returns. It is the exchange's translator (exchange.routeBody), whose
// usage is what the answer stands for once it is given.
type localAnswer struct {
	body             []byte
	usage            translate.Usage
	translate.NoText // a count, no generated text
}

// RequestBody implements translate.Translator: nothing goes to a
// provider.
func (l *localAnswer) RequestBody() (translate.Upstream, error) {
	return translate.Upstream{}, errInternal(errors.New("the gateway answers this request itself"))
}

// ResponseHeaders implements translate.Translator.
func (*localAnswer) ResponseHeaders(int, string) translate.Head {
	return translate.Head{Status: http.StatusOK, ContentType: "application/json"}
}

// ResponseBody implements translate.Translator.
func (l *localAnswer) ResponseBody([]byte, bool) ([]byte, error) { return l.body, nil }

// Usage implements translate.Translator.
func (l *localAnswer) Usage() translate.Usage { return l.usage }

// passAnswer is the answer and prices of the flows that add nothing.
type passAnswer struct{}

func (passAnswer) answer(_ context.Context, _ answerContext, out []byte, _ bool) ([]byte, error) {
	return out, nil
}

func (passAnswer) price(u pricing.Usage, _ bool) pricing.Usage { return u }

// forwarding is how the router-level stream routes a request: to the
// deployment it picked (direct), or through Envoy, which picks a
// Fallback model's deployment attempt by attempt (viaEnvoy, fallback.go).
// It sees the parts of the exchange it needs, and says what the exchange
// is to do with the answer (answerPlan).
type forwarding interface {
	// prepare readies the parsed request for admission: its prompt
	// estimate and the bound on its answer, from the request the
	// provider gets (up, when it is translated now).
	prepare(s *Server, r *request, tr translate.Translator, body []byte) (up translate.Upstream, err error)
	// send is the reply to the admitted request's body, which sends it.
	send(s *Server, r *request, rt *route, up translate.Upstream) (*extprocv3.ProcessingResponse, error)
	// translator makes the translator with build, or none, keeping build
	// for the deployment that answers.
	translator(rt *route, build builder) (translate.Translator, error)
	// answered is what the exchange of a request not yet translated does
	// with its answer's headers.
	answered(s *Server, r *request, rt *route, hm headerMap, envoyReply bool) answerPlan
	// unanswered reports that the ledger records the request also when
	// no deployment answered.
	unanswered() bool
}

// builder makes the exchange's translator for a deployment.
type builder func(providers.Provider, translate.Target) (translate.Translator, error)

// answerPlan is what the exchange does with an answer's headers when
// they are not a provider's answer to translate as planned: fail with
// err, pass on an attempt's error, answer as to one of Envoy's own
// replies (with its details), or translate with tr, the translator of the
// deployment that answered (forwarding.answered); none of them, go on.
type answerPlan struct {
	err          error
	attemptReply bool
	envoyReply   bool
	details      string
	tr           translate.Translator
}
