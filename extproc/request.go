package extproc

import (
	"context"
	"net/http"
	"unicode/utf8"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/envoy/routing"
	"modelgate/translate"
)

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
	ex.span.start(ex.s.cfg.Tracer, ctx, hm, ex.start)
	resp, err := ex.admit(ctx, hm, h.GetEndOfStream())
	if err != nil {
		return ex.fail(err)
	}
	return resp
}

// admit dispatches the request to its endpoint and dialect, answers what
// needs no key or no body (a signed image, HEAD /, what the gateway
// serves itself once the key is checked), and readies the body's phase.
func (ex *exchange) admit(ctx context.Context, hm headerMap, endOfStream bool) (*extprocv3.ProcessingResponse, error) {
	ep, err := dispatch(hm.get(":method"), hm.get(":path"))
	ex.req.endpoint, ex.req.path = ep, hm.get(":path")
	ex.req.dialect = dialectOf(ep, hm)
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
		resp, err := ex.s.serveImage(ctx, hm)
		if err == nil {
			ex.phase, ex.answer.status = phaseDone, http.StatusOK
		}
		return resp, err
	}
	if ep == endpointRoot {
		// Clients of the Messages API (Claude Code) check that the
		// gateway is up with HEAD /: answered without a key, with nothing.
		ex.phase, ex.answer.status = phaseDone, http.StatusOK
		return immediate(http.StatusOK, nil), nil
	}
	if ex.req.principal, err = ex.s.authenticate(ctx, ex.req.dialect, hm); err != nil {
		return nil, err
	}
	ex.log.with(zap.String("account_id", ex.req.principal.AccountID))
	if ep.spec().served {
		body, err := served{s: ex.s, endpoint: ep, principal: ex.req.principal, dialect: ex.req.dialect}.serve(ctx, hm.get(":path"))
		if err != nil {
			return nil, err
		}
		ex.phase, ex.answer.status = phaseDone, http.StatusOK
		return immediate(http.StatusOK, body), nil
	}
	if err := ex.req.checkBodyHeaders(hm, endOfStream, ex.s.bodyLimit(ep)); err != nil {
		return nil, err
	}
	ex.flow, _ = newFlow(ep, ex.s, hm) // every endpoint but those served above has one
	ex.phase = phaseRequestBody
	mut := stripInternal(hm, ex.req.dialect)
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
	if d := ex.req.dialect.envoyReplies; d != "" { // Envoy's own replies to it, in its API's shape (envoy.localReplyConfig)
		ex.s.setMetadata(resp, routing.DialectKey, structpb.NewStringValue(d))
	}
	return resp, nil
}

// authenticate reads the key where the client's dialect has it.
func (s *Server) authenticate(ctx context.Context, d *dialect, hm headerMap) (*authz.Principal, error) {
	key, ok := d.key(hm)
	if !ok {
		return nil, errMissingAPIKey()
	}
	return s.auth.Authenticate(ctx, key)
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
	if err != nil {
		return ex.fail(err)
	}
	if ex.phase == phaseDone { // answered by the gateway itself
		return resp
	}
	ex.phase = phaseResponseHeaders
	if limit := ex.s.cfg.MessageTimeout; limit > 0 && ex.s.now().Sub(received) >= limit {
		// Envoy stopped waiting for this reply and answered 504 itself.
		ex.answer.delivery = late
	}
	return resp
}

// routeBody parses the request for its endpoint, routes its model and
// makes its translator (flow.parse), admits it against the principal's
// limits and budgets, and sends it. A request the gateway answers itself
// once it is parsed (a count_tokens estimate) is answered as a
// provider's answer is: admitted, and recorded with the usage it stands
// for, which the rate limits are charged.
func (ex *exchange) routeBody(ctx context.Context, body []byte) (*extprocv3.ProcessingResponse, error) {
	ex.capture = newCapture(ex.s.cfg.Capture, ex.req.contentType, body)
	if int64(len(body)) > ex.s.bodyLimit(ex.req.endpoint) {
		return nil, errTooLarge()
	}
	local, err := ex.flow.parse(ctx, ex, body)
	if err != nil {
		return nil, err
	}
	if err := ex.s.guardRequest(ctx, &ex.req, body); err != nil {
		return nil, err
	}
	if local == nil && ex.route.build != nil {
		if ex.tr, err = ex.route.via.translator(&ex.route, ex.route.build); err != nil {
			return nil, err
		}
	}
	var up translate.Upstream
	if local != nil {
		// Until it is admitted the answer stands for nothing: a refusal
		// is recorded without its usage.
		ex.req.prompt, ex.tr = local.usage.PromptTokens, &localAnswer{body: local.body}
	} else if up, err = ex.route.via.prepare(ex.s, &ex.req, ex.tr, body); err != nil {
		return nil, err
	}
	if err := ex.meter.admit(ctx, &ex.req, ex.flow); err != nil {
		return nil, err
	}
	if local != nil {
		ex.tr = local
		ex.phase, ex.answer.status, ex.answer.completed = phaseDone, http.StatusOK, true
		return immediate(http.StatusOK, local.body), nil
	}
	ex.answer.delivery, ex.answer.at.sent = sent, ex.s.now()
	return ex.route.via.send(ex.s, &ex.req, &ex.route, up)
}

// direct routes to the deployment the gateway picked.
type direct struct{}

// prepare translates the request for the deployment.
func (direct) prepare(_ *Server, r *request, tr translate.Translator, _ []byte) (translate.Upstream, error) {
	up, err := tr.RequestBody()
	if err != nil {
		return up, err
	}
	if !r.endpoint.spec().form { // the provider's body: with a continuation's history
		r.prompt = promptEstimate(up.Body)
	}
	if n := translate.MaxOutputTokens(tr); n > 0 { // what the provider is sent, not the client's
		r.maxOutput = n
	}
	return up, nil
}

// send points Envoy's router at the deployment with the translated
// request.
func (direct) send(s *Server, r *request, rt *route, up translate.Upstream) (*extprocv3.ProcessingResponse, error) {
	h := headers{remove: sentHeaders(r.dialect, up)}
	h.reserve(6 + len(up.Headers))
	// Envoy's routes match these and remove them before the upstream.
	h.Set(s.cfg.RoutingHeader, rt.target.Backend)
	h.Set(routing.ModelHeader, r.model)
	if r.stream {
		h.Set(routing.StreamHeader, "1")
	}
	resp := sendUpstream(&h, up, r.path, r.contentType)
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

// translator keeps build, which makes the translator for the deployment
// the request goes to once the request rules let it go (routeBody): a
// translator may take its request apart when it is made, and what a rule
// masks must be masked in it. The router-level stream of a Fallback
// model makes it only once the answer names the deployment that gave it.
func (ex *exchange) translator(build builder) error {
	ex.route.build = build
	return nil
}

func (direct) translator(rt *route, build builder) (translate.Translator, error) {
	return build(rt.provider, rt.target)
}

func (direct) answered(*Server, *request, *route, headerMap, bool) answerPlan {
	return answerPlan{}
}

func (direct) unanswered() bool { return false }

// pick routes the model a request names and asks a of (an auto model's
// to the candidate it chooses), finds what the model drops of the
// request, and resolves the backend's per-request credential. For a
// Fallback model Envoy picks the deployment (an attempt's stream takes
// the one Envoy picked: attemptStream.pick).
func (ex *exchange) pick(ctx context.Context, model string, a *asks) error {
	ex.req.requested = clientLabel(model)
	m, as, err := ex.s.router.lookup(ex.req.principal, model)
	ex.req.requestedAs = as
	if err != nil {
		if ae, ok := err.(*APIError); ok && ae.Status == http.StatusForbidden {
			ex.req.model, ex.req.refusedModel = ex.req.requested, true // the ledger shows refusals beside successes
		}
		return err
	}
	if m.Auto != nil {
		if m, err = ex.s.choose(m, ex.req.endpoint, a); err != nil {
			return err
		}
		ex.req.auto = true
	}
	if ex.req.drop, err = ex.s.router.serves(m, a); err != nil {
		return err
	}
	var rt route
	if m.Fallback != nil {
		rt, err = ex.s.fallbackRoute(m, ex.req.endpoint)
	} else {
		rt, err = ex.s.deploy(ctx, m, pick(m.Deployments))
	}
	if err != nil {
		return err
	}
	ex.req.model, ex.route = m.ID, rt
	if ex.req.requested != m.ID {
		ex.log.with(zap.String("requested_model", ex.req.requested))
	}
	if m.Fallback != nil {
		ex.log.with(zap.String("model", m.ID), zap.Bool("fallback", true))
	} else {
		ex.log.with(zap.String("provider", rt.target.Provider), zap.String("model", m.ID))
	}
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
