package extproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/authz/ledger"
	"modelgate/extproc/routing"
	"modelgate/translate"
	"modelgate/translate/providers"
)

// clientHeaders never reach a provider: the client's credentials (the
// gateway sets the provider's own instead), its OpenAI account headers and
// its cookies.
var clientHeaders = []string{"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key",
	"openai-organization", "openai-project", "cookie"}

// requestHeaders strips internal headers, dispatches, authenticates and
// answers what it can without the body.
func (ex *exchange) requestHeaders(ctx context.Context, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	hm := readHeaders(h.GetHeaders())
	// The gateway's own id names the exchange in the ledger, captures,
	// logs and traces: x-request-id is the client's to choose wherever
	// Envoy is not the edge, and reusing another's would make the admin's
	// views of that request show the wrong one. The client's is kept
	// beside it.
	ex.req.id, ex.req.clientID, ex.req.session = newRequestID(), clientLabel(hm.get(requestIDHeader)), sessionID(hm)
	ex.log.with(zap.String("request_id", ex.req.id), zap.String("client_request_id", ex.req.clientID))
	ex.startSpan(ctx, hm)
	resp, err := ex.admit(ctx, hm, h.GetEndOfStream())
	if err != nil {
		return ex.fail(err)
	}
	return resp
}

func (ex *exchange) admit(ctx context.Context, hm headerMap, endOfStream bool) (*extprocv3.ProcessingResponse, error) {
	ep, err := dispatch(hm.get(":method"), hm.get(":path"))
	ex.req.endpoint, ex.req.path = ep, hm.get(":path")
	// The Messages API's endpoints answer in its shape, and so does the
	// model list (and a model of it) to a client of that API.
	ex.req.anthropic = ep.spec().anthropic ||
		(ep == endpointModels || ep == endpointModel) && (hm.get("anthropic-version") != "" || hm.get("x-api-key") != "")
	// Envoy passes an upgrade (a WebSocket handshake) to the filters with
	// its upgrade header when the connection manager allows the upgrade
	// type (envoy.Bootstrap allows websocket for this answer).
	if protocol, ok := hm.lookup("upgrade"); ok {
		return nil, errUpgrade(protocol)
	}
	if err != nil {
		return nil, err
	}
	if ep.spec().signed {
		return ex.serveImage(ctx, hm)
	}
	if ep == endpointRoot {
		// Clients of the Messages API (Claude Code) check that the
		// gateway is up with HEAD /: answered without a key, with nothing.
		ex.phase, ex.answer.status = phaseDone, http.StatusOK
		return immediate(http.StatusOK, nil), nil
	}
	if err := ex.authenticate(ctx, hm); err != nil {
		return nil, err
	}
	if ep.spec().served {
		body, err := ex.serve(ctx, hm.get(":path"))
		if err != nil {
			return nil, err
		}
		ex.phase, ex.answer.status = phaseDone, http.StatusOK
		return immediate(http.StatusOK, body), nil
	}
	if err := ex.checkBodyHeaders(hm, endOfStream); err != nil {
		return nil, err
	}
	ex.flow = ep.spec().flow(ex.s, hm)
	ex.phase = phaseRequestBody
	mut := stripInternal(hm, ep.spec().anthropic)
	// The request's id becomes the gateway's, for Envoy too: its access
	// log, and the attempts of a fallback, which share the request's
	// headers. The answers get it from withRequestID.
	mut.Set(requestIDHeader, ex.req.id)
	resp := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
			HeaderMutation:  mut.mutation(),
			ClearRouteCache: true,
		}},
	}}
	if ex.req.anthropic { // Envoy's own replies to it, in its API's shape (envoy.localReplyConfig)
		ex.s.setMetadata(resp, routing.DialectKey, structpb.NewStringValue(routing.AnthropicDialect))
	}
	return resp, nil
}

// newRequestID is a random UUID (version 4), the form of Envoy's own
// request ids, which its tracing reads. Written here rather than taken
// from github.com/google/uuid, which imports database/sql/driver
// (TestExtprocHasNoConcreteStores).
func newRequestID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// internalPrefix starts the headers only the gateway sets.
const internalPrefix = "x-modelgate-"

// strippedPrefixes start the request headers no client may send on: the
// gateway's own, and those of the providers' APIs, which would choose on
// the operator's account what the operator never enabled (api.LeftOut): a
// service tier, a latency or guardrail setting, temporary credentials, a
// Google project to bill, an Anthropic beta. A translator sets what its
// provider needs.
var strippedPrefixes = []string{internalPrefix, "anthropic-", "openai-", "x-amz-", "x-amzn-", "x-goog-"}

// messagesClientHeaders are the headers of the Messages API's clients its
// translators read (the flow at the request's headers, and each attempt
// of a Fallback model, which has only the shared header map to read
// them from): kept on a Messages request, and removed at its body unless
// its translator sets them (sentHeaders), as an attempt removes
// every provider header it does not set.
var messagesClientHeaders = []string{"anthropic-beta", "anthropic-version"}

// stripInternal removes every header the client sent under
// strippedPrefixes, but a Messages request's messagesClientHeaders (messages).
// The route cache is cleared with it, because Envoy chose the first route
// from the client's headers.
func stripInternal(hm headerMap, messages bool) *headers {
	var h headers
	for _, k := range hm.prefixed(strippedPrefixes) {
		if !messages || !slices.Contains(messagesClientHeaders, k) {
			h.Remove(k)
		}
	}
	return &h
}

// sentHeaders are the headers a request body's reply removes: the
// client's credentials and, for a Messages request, the
// messagesClientHeaders its translator does not set, which would
// otherwise reach the provider as the client sent them (a beta the model
// does not enable).
func sentHeaders(messages bool, up translate.Upstream) []string {
	out := clientHeaders[:len(clientHeaders):len(clientHeaders)] // a later Remove copies
	if !messages {
		return out
	}
	for _, name := range messagesClientHeaders {
		if !slices.ContainsFunc(up.Headers, func(h translate.Header) bool { return h.Name == name }) {
			out = append(out, name)
		}
	}
	return out
}

// authenticate reads the key from Authorization: Bearer, as OpenAI's
// clients send it, else from x-api-key, as Anthropic's do.
func (ex *exchange) authenticate(ctx context.Context, hm headerMap) error {
	key, ok := bearer(hm.get("authorization"))
	if !ok {
		key = strings.TrimSpace(hm.get("x-api-key"))
		ok = key != ""
	}
	if !ok {
		return errMissingAPIKey()
	}
	p, err := ex.s.auth.Authenticate(ctx, key)
	if err != nil {
		return err
	}
	ex.req.principal = p
	ex.log.with(zap.String("account_id", p.AccountID))
	return nil
}

func bearer(authorization string) (string, bool) {
	scheme, key, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != ""
}

// checkBodyHeaders refuses what the headers already show to be wrong: no
// body, a declared length over the endpoint's limit, a multipart body for
// a JSON endpoint. Transcriptions take multipart bodies only; the parser
// judges their content type.
func (ex *exchange) checkBodyHeaders(hm headerMap, endOfStream bool) error {
	if endOfStream {
		return errMissingBody()
	}
	if cl, err := strconv.ParseInt(hm.get("content-length"), 10, 64); err == nil && cl > ex.s.bodyLimit(ex.req.endpoint) {
		return errTooLarge()
	}
	ex.req.contentType = hm.get("content-type")
	if ex.req.endpoint.spec().form {
		return nil
	}
	if ct := hm.get("content-type"); ct != "" {
		if mt := translate.MediaType(ct); strings.HasPrefix(mt, "multipart/") {
			return errUnsupportedMediaType(mt)
		}
	}
	return nil
}

// bodyLimit is the largest request body of the endpoint.
func (s *Server) bodyLimit(ep endpoint) int64 {
	if ep.spec().form {
		return s.cfg.MaxAudioBodyBytes
	}
	return s.cfg.MaxRequestBodyBytes
}

// requestBody validates and routes the request, translates it for the
// chosen provider and points Envoy's router at that backend.
func (ex *exchange) requestBody(ctx context.Context, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	received := ex.s.now()
	resp, err := ex.routeBody(ctx, b.GetBody())
	var local *localAnswer
	if errors.As(err, &local) {
		return ex.answerLocally(ctx, local)
	}
	if err != nil {
		return ex.fail(err)
	}
	ex.phase = phaseResponseHeaders
	if limit := ex.s.cfg.MessageTimeout; limit > 0 && ex.s.now().Sub(received) >= limit {
		// Envoy stopped waiting for this reply and answered 504 itself.
		ex.answer.sent, ex.answer.late = false, true
	}
	return resp
}

// answerLocally answers a request the gateway serves itself once it is
// parsed (a count_tokens estimate) as a provider's answer is answered:
// admitted against the principal's limits and budgets, and recorded with
// the usage it stands for, which the rate limits are charged.
func (ex *exchange) answerLocally(ctx context.Context, local *localAnswer) *extprocv3.ProcessingResponse {
	// Until it is admitted the answer stands for nothing: a refusal is
	// recorded without its usage.
	used := local.usage
	ex.req.prompt, ex.tr, local.usage = used.PromptTokens, local, translate.Usage{}
	if err := ex.admitRouted(ctx); err != nil {
		return ex.fail(err)
	}
	local.usage = used
	ex.phase, ex.answer.status, ex.answer.completed = phaseDone, http.StatusOK, true
	return immediate(http.StatusOK, local.body)
}

func (ex *exchange) routeBody(ctx context.Context, body []byte) (*extprocv3.ProcessingResponse, error) {
	ex.captureRequest(body)
	if err := ex.parse(ctx, body); err != nil {
		return nil, err
	}
	return ex.route.via.send(ctx, ex, body)
}

// forwarding is how the router-level stream routes a request: to the
// deployment it picked (direct), or through Envoy, which picks a
// Fallback model's deployment attempt by attempt (viaEnvoy, fallback.go).
type forwarding interface {
	// send answers the parsed request's body.
	send(ctx context.Context, ex *exchange, body []byte) (*extprocv3.ProcessingResponse, error)
	// translator makes the exchange's translator with build, or keeps
	// build for the deployment that answers.
	translator(ex *exchange, build builder) error
	// answered prepares the exchange of a request not yet translated for
	// its answer's headers. It returns a reply when the answer is not a
	// provider's to translate, nil to go on.
	answered(ex *exchange, status int, hm headerMap, envoyReply, eos bool) *extprocv3.ProcessingResponse
	// unanswered reports that the ledger records the request also when
	// no deployment answered.
	unanswered() bool
}

// direct routes to the deployment the gateway picked.
type direct struct{}

// send translates the request for the deployment, admits it against the
// limits and budgets, and points Envoy's router at the deployment.
func (direct) send(ctx context.Context, ex *exchange, _ []byte) (*extprocv3.ProcessingResponse, error) {
	up, err := ex.tr.RequestBody()
	if err != nil {
		return nil, err
	}
	if !ex.req.endpoint.spec().form { // the provider's body: with a continuation's history
		ex.req.prompt = promptEstimate(up.Body)
	}
	if n := translate.MaxOutputTokens(ex.tr); n > 0 { // what the provider is sent, not the client's
		ex.req.maxOutput = n
	}
	if err := ex.admitRouted(ctx); err != nil {
		return nil, err
	}
	h := headers{remove: sentHeaders(ex.req.endpoint.spec().anthropic, up)}
	h.reserve(6 + len(up.Headers))
	// Envoy's routes match these and remove them before the upstream.
	h.Set(ex.s.cfg.RoutingHeader, ex.route.target.Backend)
	h.Set(routing.ModelHeader, ex.req.model)
	if ex.req.stream {
		h.Set(routing.StreamHeader, "1")
	}
	ex.answer.sent, ex.answer.sentAt = true, ex.s.now()
	resp := sendUpstream(&h, up, ex.req.path, ex.req.contentType)
	resp.GetRequestBody().Response.ClearRouteCache = true
	return resp, nil
}

// sendUpstream is the reply to a request body that sends up to the
// provider, for the router-level stream and an attempt alike: h with
// up's :path, content-length, accept-encoding: identity (the gateway
// reads the answer) and up's headers, and up's body. A :path or
// content-type the request has already (path, contentType) costs Envoy
// nothing to leave.
func sendUpstream(h *headers, up translate.Upstream, path, contentType string) *extprocv3.ProcessingResponse {
	if up.Path != path {
		h.Set(":path", up.Path)
	}
	h.SetInt("content-length", int64(len(up.Body)))
	h.Set("accept-encoding", "identity")
	for _, uh := range up.Headers {
		if uh.Name == "content-type" && uh.Value == contentType {
			continue
		}
		h.Set(uh.Name, uh.Value)
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
			HeaderMutation: h.mutation(),
			BodyMutation:   bodyMutation(up.Body),
		}},
	}}
}

// parse validates the client's request for the endpoint, routes its
// model and sets up the exchange's translator.
func (ex *exchange) parse(ctx context.Context, body []byte) error {
	if int64(len(body)) > ex.s.bodyLimit(ex.req.endpoint) {
		return errTooLarge()
	}
	return ex.flow.parse(ctx, ex, body)
}

// builder makes the exchange's translator for a deployment.
type builder func(providers.Provider, translate.Target) (translate.Translator, error)

// translator keeps build and makes the translator for the deployment
// the request goes to. The router-level stream of a Fallback model makes
// it only once the answer names the deployment that gave it.
func (ex *exchange) translator(build builder) error {
	ex.route.build = build
	return ex.route.via.translator(ex, build)
}

func (direct) translator(ex *exchange, build builder) error {
	tr, err := build(ex.route.provider, ex.route.target)
	ex.tr = tr
	return err
}

func (direct) answered(*exchange, int, headerMap, bool, bool) *extprocv3.ProcessingResponse {
	return nil
}

func (direct) unanswered() bool { return false }

// pick routes the model and resolves the backend's per-request credential.
// For a Fallback model Envoy picks the deployment (an attempt's stream
// takes the one Envoy picked: attemptStream.pick).
func (ex *exchange) pick(ctx context.Context, model string) error {
	m, err := ex.s.router.lookup(ex.req.principal, model)
	if err != nil {
		if ae, ok := err.(*APIError); ok && ae.Status == http.StatusForbidden {
			ex.req.model, ex.req.refusedModel = model, true // the ledger shows refusals beside successes
		}
		return err
	}
	if m.Fallback != nil {
		return ex.pickFallback(m)
	}
	return ex.use(ctx, m, pick(m.Deployments))
}

// use routes the exchange to a deployment of the model.
func (ex *exchange) use(ctx context.Context, m *routing.Model, d routing.Deployment) error {
	r, err := ex.s.deploy(ctx, m, d)
	if err != nil {
		return err
	}
	ex.req.model, ex.route = m.ID, r
	ex.log.with(zap.String("provider", r.target.Provider), zap.String("model", m.ID))
	return nil
}

// deploy is the route of a request for model m to its deployment d: the
// target, with the backend's per-request credential, its provider and
// its timeouts.
func (s *Server) deploy(ctx context.Context, m *routing.Model, d routing.Deployment) (route, error) {
	target, timeouts := s.router.target(m, d)
	if token := s.router.backends[target.Backend].Token; token != nil {
		var err error
		if target.APIKey, err = token(ctx); err != nil {
			return route{}, errProviderCredentials(err)
		}
	}
	return route{target: target, provider: s.providers[target.Provider], timeouts: timeouts, via: direct{}}, nil
}

// fail ends the exchange with an OpenAI error as an immediate response.
func (ex *exchange) fail(err error) *extprocv3.ProcessingResponse {
	apiErr := toAPIError(err).shaped(ex.req.anthropic)
	logFailure(&ex.log, apiErr, err)
	ex.phase = phaseDone
	ex.answer.status, ex.answer.errType, ex.answer.errCode = apiErr.Status, apiErr.Type, apiErr.Code
	if ex.capture != nil {
		ex.captureResponse(apiErr.Body())
	}
	return errorResponse(apiErr)
}

// logFailure logs a request the gateway failed or refused.
func logFailure(log *exchangeLog, apiErr *APIError, err error) {
	if apiErr.Status >= 500 {
		log.Error("request failed", zap.Int("status", apiErr.Status), zap.Error(err))
	} else {
		log.Debug("request rejected", zap.Int("status", apiErr.Status), zap.String("code", apiErr.Code))
	}
}

// maxClientLabel bounds what the gateway keeps of a client-chosen label
// (its x-request-id, an agent session id) in every ledger row, log line
// and span: a UUID is 36 bytes, and no client needs more than a few times
// that to find its requests.
const maxClientLabel = 128

// sessionID is the agent session a request belongs to, as its client
// names it: Claude Code's x-claude-code-session-id, else Codex's
// session_id; kept as clientLabel keeps it.
func sessionID(hm headerMap) string {
	s := hm.get("x-claude-code-session-id")
	if s == "" {
		s = hm.get("session_id")
	}
	return clientLabel(s)
}

// clientLabel is a label the client chose as the gateway keeps it:
// storable (ledger.Storable), cut at a character's start to at most
// maxClientLabel bytes. A header may carry
// any bytes; no store may refuse the record they end up in.
func clientLabel(s string) string {
	if s = ledger.Storable(s); len(s) > maxClientLabel {
		n := maxClientLabel
		for !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}
