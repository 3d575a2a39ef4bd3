package extproc

import (
	"context"
	"errors"
	"net/http"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"modelgate/authz/pricing"
	"modelgate/envoy/routing"
	"modelgate/translate"
	"modelgate/translate/providers"
)

// What the exchange's parts see of each other: where a request is routed
// and how it is forwarded, the flow of its endpoint and the stream it
// parses for, what a flow sees of the answer, and the phase.

// route is where the request goes.
type route struct {
	target   translate.Target
	provider providers.Provider // the target's provider
	timeouts routing.Timeouts   // the model's on its backend
	build    builder            // makes tr for a deployment (kept for a Fallback model's answer)
	via      forwarding         // direct, or through Envoy (a Fallback model)
}

// flow is what a request to one endpoint that reaches a provider does in
// the exchange: it parses the client's request and routes its model,
// builds the translator of a deployment, adds to the translated answer
// what the gateway adds, and tells prices what the request asked for.
type flow interface {
	// parse validates the client's body, routes the model it names
	// (parser.pick) and hands over what builds the translator
	// (parser.translator). A request the gateway answers itself once it
	// is parsed (a token count it estimates) gives its answer instead.
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
	// pick routes the model the request names and asks a of (nil for
	// an endpoint the capabilities do not describe).
	pick(ctx context.Context, model string, a *asks) error
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
	// refused: a guardrail blocked the answer, which ended with its
	// API's refusal.
	refused bool
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
