package extproc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/translate"
	"modelgate/translate/providers"
)

// Cross-provider fallback by Envoy's own machinery (Model.Fallback; the
// Envoy rules it relies on are in envoy/standin's doc.go, "Retries" and
// "Upstream HTTP filters"). A request for a Fallback model opens several
// ext_proc streams on this server:
//
//   - The router-level stream authenticates, admits rate limits and routes
//     the model without picking a deployment. It sets x-modelgate-model
//     (and x-modelgate-stream), which select the model's route and cluster,
//     sets no routing header, removes the client's credentials and passes
//     the client's OpenAI body on unchanged, keeping the parsed request. It
//     also writes the request's context as dynamic metadata (namespace
//     Config.MetadataNamespace: request_path, request_content_type,
//     account_id), because Envoy keeps ONE request header map for all
//     attempts and the first attempt overwrites :path and content-type.
//   - One upstream stream per attempt, from the ext_proc filter in the
//     model cluster's upstream filter chain. It is recognised by request
//     attribute xds.upstream_host_metadata in its first message, which
//     names the deployment Envoy chose (filter_metadata[namespace].backend).
//     It translates the client's body for that backend's provider as the
//     router-level stream does for other models (credential included),
//     sets :path, and removes every header an earlier attempt for another
//     provider may have set. On the attempt's response headers it adds
//     x-modelgate-deployment: <backend>, which reaches the client too.
//   - The router-level stream then sees one answer (the final attempt's, or
//     one of Envoy's own replies) and translates it with the translator of
//     the backend x-modelgate-deployment names.
//
// An error in an upstream stream (a request the chosen provider refuses to
// translate, a credential that cannot be minted) is an immediate response
// in the OpenAI error shape, marked with x-modelgate-upstream-reply. Envoy
// does not retry such a reply on another deployment: local replies of
// upstream filters are final (Envoy's http_protocol_options.proto,
// http_filters: "Local errors sent by upstream filters will not trigger
// retries"). The router-level stream passes it on.

// Headers of the fallback machinery.
const (
	// deploymentHeader names the backend that answered, on the response.
	deploymentHeader = "x-modelgate-deployment"
	// attemptReplyHeader marks an upstream stream's own error reply; its
	// value is the reply's details.
	attemptReplyHeader = "x-modelgate-upstream-reply"
)

// What Envoy sends an upstream stream (ext_proc.cc, evaluateAttributes):
// request attributes under the ext_proc filter's fixed key, as a Struct from the expression
// text to its value.
const (
	extProcAttributes     = "envoy.filters.http.ext_proc"
	hostMetadataAttribute = "xds.upstream_host_metadata"
	attemptCountAttribute = "upstream.request_attempt_count"
	// backendMetadataKey names the backend in the endpoint metadata of a
	// model cluster (envoy.BackendMetadataKey).
	backendMetadataKey = "backend"
)

// Keys of the request context the router-level stream writes as dynamic
// metadata for the upstream streams.
const (
	contextPath        = "request_path"
	contextContentType = "request_content_type"
	contextAccount     = "account_id"
	// contextClientID is the x-request-id the client sent: the attempt's
	// own header is the gateway's request id.
	contextClientID = "client_request_id"
)

// attempt is an upstream stream: one attempt of a Fallback model.
type attempt struct {
	backend string    // the backend Envoy chose
	count   int       // Envoy's attempt count: 1, 2, …; 0 when not sent
	err     error     // the attribute did not name a backend
	headers headerMap // the request headers of the attempt (shared by all)
	ctx     requestContext
	// answered: the provider's response headers came; recorded: the
	// attempt's failure is in the ledger.
	answered, recorded bool
}

// requestContext is what an attempt needs of the client's request that
// the shared header map may no longer show.
type requestContext struct {
	path, contentType, account, clientID string
}

// upstreamAttempt recognises the first message of an upstream stream by
// the attribute naming its backend (envoy.UpstreamAttributes), which Envoy
// puts under the filter's fixed key; nil for a router-level stream.
func (s *Server) upstreamAttempt(req *extprocv3.ProcessingRequest) *attempt {
	attrs := req.GetAttributes()[extProcAttributes].GetFields()
	path := hostMetadataAttribute + ".filter_metadata['" + s.cfg.MetadataNamespace + "']['" + backendMetadataKey + "']"
	v, ok := attrs[path]
	if !ok {
		return nil
	}
	a := &attempt{count: attemptCount(attrs[attemptCountAttribute]), backend: v.GetStringValue()}
	if a.backend == "" {
		a.err = fmt.Errorf("attribute %s is %v, not a backend name", path, v)
	}
	return a
}

func attemptCount(v *structpb.Value) int {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		return int(k.NumberValue)
	case *structpb.Value_StringValue:
		n, _ := strconv.Atoi(k.StringValue)
		return n
	}
	return 0
}

// readContext reads the request context from the metadata Envoy forwards;
// what is missing stays as it was.
func (a *attempt) readContext(md *corev3.Metadata, ns string) {
	f := md.GetFilterMetadata()[ns].GetFields()
	for key, dst := range map[string]*string{contextPath: &a.ctx.path, contextContentType: &a.ctx.contentType,
		contextAccount: &a.ctx.account, contextClientID: &a.ctx.clientID} {
		if v := f[key].GetStringValue(); v != "" {
			*dst = v
		}
	}
}

// handleAttempt answers the messages of an upstream stream.
func (ex *exchange) handleAttempt(ctx context.Context, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	ex.recorded, ex.meter.rateSettled = true, true // the router-level stream records and charges the request
	ex.attempt.readContext(req.GetMetadataContext(), ex.s.cfg.MetadataNamespace)
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		if err := ex.expect(phaseRequestHeaders); err != nil {
			return nil, err
		}
		return ex.attemptHeaders(r.RequestHeaders), nil
	case *extprocv3.ProcessingRequest_RequestBody:
		if err := ex.expect(phaseRequestBody); err != nil {
			return nil, err
		}
		return ex.attemptBody(ctx, r.RequestBody), nil
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		if err := ex.expect(phaseResponseHeaders); err != nil {
			return nil, err
		}
		return ex.attemptResponse(ctx, r.ResponseHeaders), nil
	case *extprocv3.ProcessingRequest_ResponseBody:
		// The upstream filter's response body mode is NONE; a body sent
		// anyway passes unchanged (the router-level stream translates it).
		return bodyReply(nil, false, nil), nil
	}
	return nil, fmt.Errorf("unexpected %T in an upstream stream's phase %s", req.GetRequest(), ex.phase)
}

// attemptHeaders keeps the attempt's request headers for its body.
func (ex *exchange) attemptHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	a := ex.attempt
	a.headers = readHeaders(h.GetHeaders())
	ex.log.with(zap.String("request_id", a.headers.get(requestIDHeader)), zap.String("backend", a.backend),
		zap.Int("attempt", a.count))
	if a.err != nil {
		return ex.fail(errInternal(a.err))
	}
	if h.GetEndOfStream() {
		return ex.fail(errMissingBody())
	}
	ex.phase = phaseRequestBody
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{},
	}}
}

// attemptBody translates the client's body for the attempt's backend.
func (ex *exchange) attemptBody(ctx context.Context, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	resp, err := ex.translateAttempt(ctx, b.GetBody())
	ex.s.cfg.Metrics.attempted(ex.req.model, ex.attempt.backend, ex.attempt.count)
	if err != nil {
		return ex.fail(err)
	}
	ex.phase = phaseResponseHeaders
	return resp
}

func (ex *exchange) translateAttempt(ctx context.Context, body []byte) (*extprocv3.ProcessingResponse, error) {
	a := ex.attempt
	rc := a.ctx
	if a.count <= 1 { // the first attempt sees the client's own headers
		rc.path = cmpOr(rc.path, a.headers.get(":path"))
		rc.contentType = cmpOr(rc.contentType, a.headers.get("content-type"))
	}
	if rc.path == "" {
		return nil, errInternal(fmt.Errorf("attempt %d carries no %s in dynamic metadata %q: the upstream ext_proc filter must forward that namespace (metadata_options.forwarding_namespaces)",
			a.count, contextPath, ex.s.cfg.MetadataNamespace))
	}
	ep, err := dispatch(a.headers.get(":method"), rc.path)
	if err != nil || ep.spec().flow == nil {
		return nil, errInternal(fmt.Errorf("attempt %d: %s %s is not an endpoint with a provider", a.count, a.headers.get(":method"), rc.path))
	}
	ex.req.endpoint, ex.req.contentType, ex.flow = ep, rc.contentType, ep.spec().flow(ex.s, a.headers)
	if rc.account != "" {
		ex.req.principal = &authz.Principal{AccountID: rc.account}
	}
	if err := ex.parse(ctx, body); err != nil {
		return nil, err
	}
	up, err := ex.tr.RequestBody()
	if err != nil {
		return nil, err
	}
	var h headers
	// Envoy shares one header map across attempts: what an earlier
	// attempt set for another provider is still there.
	for _, name := range attemptHeaderNames() {
		if !slices.ContainsFunc(up.Headers, func(uh translate.Header) bool { return uh.Name == name }) {
			h.Remove(name)
		}
	}
	for _, k := range a.headers.internal() {
		h.Remove(k)
	}
	ex.log.Debug("attempt translated", zap.String("provider", ex.route.target.Provider), zap.String("path", up.Path))
	return sendUpstream(&h, up, a.headers.get(":path"), a.headers.get("content-type")), nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// pickAttempt routes an attempt to the deployment Envoy chose. The
// router-level stream checked the key and its models; the model is
// looked up again only to find the deployment.
func (ex *exchange) pickAttempt(ctx context.Context, model string) error {
	m, ok := ex.s.router.models[model]
	if !ok {
		return errModelNotFound(model)
	}
	d, ok := m.deployment(ex.attempt.backend)
	if !ok {
		return errInternal(fmt.Errorf("envoy chose backend %q, which does not serve model %q", ex.attempt.backend, model))
	}
	return ex.use(ctx, m, d)
}

// attemptResponse names the attempt's backend on its response, for the
// router-level stream. The marks of replies that are not a provider's are
// removed: a provider cannot pass for Envoy or for the gateway.
func (ex *exchange) attemptResponse(ctx context.Context, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	ex.attempt.answered = true
	if status, _ := strconv.Atoi(readHeaders(h.GetHeaders()).get(":status")); status < 200 || status > 299 {
		ex.recordAttempt(ctx, status)
	}
	var mut headers
	mut.Remove(localReplyHeader)
	mut.Remove(attemptReplyHeader)
	mut.Set(deploymentHeader, ex.attempt.backend)
	ex.phase = phaseDone
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: mut.mutation()}},
	}}
}

// recordAttempt writes a failed attempt's record to the ledger: its
// backend and status (0: no answer), no tokens. The request's own record,
// which charges the deployment that answered, is the router-level
// stream's.
func (ex *exchange) recordAttempt(ctx context.Context, status int) {
	a := ex.attempt
	if a.recorded || ex.tr == nil {
		return // not translated: the attempt never reached the provider
	}
	a.recorded = true
	end := ex.s.now()
	rec := authz.UsageRecord{RequestID: a.headers.get(requestIDHeader), ClientRequestID: a.ctx.clientID, AccountID: a.ctx.account, Endpoint: ex.req.endpoint.String(),
		Model: ex.req.model, Backend: a.backend, Status: status, Attempt: max(a.count, 1), Duration: end.Sub(ex.start), At: end}
	rec.Cost, rec.CostKnown = ex.cost(pricing.Usage{}, end) // no tokens: nothing, where the model has a price
	if err := ex.s.usage.AppendUsage(ex.bookkeeping(ctx), rec); err != nil {
		ex.log.Error("recording a failed attempt", zap.Error(err))
	}
}

// attemptError is an upstream stream's error reply: the OpenAI error,
// marked so that the router-level stream passes it on as it is.
func attemptError(e *APIError) *extprocv3.ProcessingResponse {
	resp := errorResponse(e)
	ir := resp.GetImmediateResponse()
	ir.Headers.SetHeaders = append(ir.Headers.SetHeaders, &corev3.HeaderValueOption{
		Header: &corev3.HeaderValue{Key: attemptReplyHeader, RawValue: []byte(ir.GetDetails())},
	})
	return resp
}

// attemptHeaderNames are the request headers an attempt removes unless it
// sets them itself: the client's credentials and every header a provider
// declares its translators set (credentials, API versions, signatures).
var attemptHeaderNames = sync.OnceValue(func() []string {
	names := append(slices.Clone(clientHeaders), providers.RequestHeaders()...)
	slices.Sort(names)
	return slices.Compact(names)
})

// pickFallback routes a Fallback model at the router level: Envoy picks
// the deployment. Every deployment must serve the endpoint, since an
// attempt that cannot is a final error, never a fallback.
func (ex *exchange) pickFallback(m *Model) error {
	for _, d := range m.Deployments {
		if !ex.req.endpoint.spec().serves(ex.s.providers[ex.s.router.backends[d.Backend].Provider]) {
			return errEndpointNotSupported(m.ID, ex.req.endpoint)
		}
	}
	_, ex.route.timeouts = ex.s.router.target(m, m.first())
	ex.req.model, ex.route.fallback = m.ID, m
	ex.log.with(zap.String("model", m.ID), zap.Bool("fallback", true))
	return nil
}

// passOn admits a Fallback model's request and hands the client's body to
// Envoy unchanged, with the model's route headers and the request's
// context for the upstream streams.
func (ex *exchange) passOn(ctx context.Context, body []byte) (*extprocv3.ProcessingResponse, error) {
	if !ex.req.endpoint.spec().form {
		ex.req.prompt = promptEstimate(body)
	}
	if ex.req.maxOutput == 0 && ex.req.endpoint.spec().generates {
		ex.req.maxOutput = ex.fallbackOutputBound()
	}
	if err := ex.admitRouted(ctx); err != nil {
		return nil, err
	}
	h := headers{remove: clientHeaders[:len(clientHeaders):len(clientHeaders)]} // a later Remove copies
	h.Set("accept-encoding", "identity")
	h.Set(modelHeader, ex.req.model)
	if ex.req.stream {
		h.Set(streamHeader, "1")
	}
	rc, err := structpb.NewStruct(map[string]any{
		contextPath:        ex.req.path,
		contextContentType: ex.req.contentType,
		contextAccount:     ex.req.principal.AccountID,
		contextClientID:    ex.req.clientID,
	})
	if err != nil { // cannot happen: strings only
		return nil, err
	}
	ex.answer.sent, ex.answer.sentAt = true, ex.s.now()
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{HeaderMutation: h.mutation(), ClearRouteCache: true},
		}},
		DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			ex.s.cfg.MetadataNamespace: structpb.NewStructValue(rc),
		}},
	}, nil
}

// fallbackOutputBound is the most a deployment of the Fallback model may
// be sent as the bound on an answer whose client sets none (Anthropic's
// required max_tokens, else Config.DefaultOutputTokens): Envoy picks the
// deployment after admission.
func (ex *exchange) fallbackOutputBound() int64 {
	out := ex.s.cfg.DefaultOutputTokens
	for _, d := range ex.route.fallback.Deployments {
		if def := ex.s.providers[ex.s.router.backends[d.Backend].Provider].DefaultMaxOutput; def != nil {
			out = max(out, def(d.Model))
		}
	}
	return out
}

// answered prepares the router-level stream of a Fallback model for its
// answer: it builds the translator of the deployment that answered. It
// returns a reply when the answer is not a provider's translated one: an
// upstream stream's error (passed on), or a reply of Envoy's without the
// local-reply mark (answered as Envoy's own replies are); nil lets
// responseHeaders go on, to the fault path for Envoy's marked replies.
func (ex *exchange) answered(status int, hm headerMap, envoyReply, eos bool) *extprocv3.ProcessingResponse {
	if _, ok := hm.lookup(attemptReplyHeader); ok {
		return ex.attemptReplyHeaders(status)
	}
	if envoyReply {
		return nil
	}
	backend, ok := hm.lookup(deploymentHeader)
	if !ok {
		return ex.envoyReplyHeaders(status, "", eos)
	}
	d, ok := ex.route.fallback.deployment(backend)
	if !ok {
		return ex.fail(errUpstream(fmt.Errorf("the answer names deployment %q, not one of model %q's", backend, ex.req.model)))
	}
	target, timeouts := ex.s.router.target(ex.route.fallback, d)
	p := ex.s.providers[target.Provider]
	tr, err := ex.route.build(p, target)
	if err != nil {
		return ex.fail(err)
	}
	ex.req.prompt = 0 // admitted with the client's body; promptTokens estimates the deployment's
	ex.route.target, ex.route.provider, ex.route.timeouts, ex.tr = target, p, timeouts, tr
	ex.log.with(zap.String("backend", backend), zap.String("provider", target.Provider))
	return nil
}

// attemptReplyHeaders passes on an upstream stream's error, already the
// OpenAI error (local_reply_config may have rewritten a 500's body, also
// to one), without the marks. Its body, if any, passes unchanged (settledBody).
func (ex *exchange) attemptReplyHeaders(status int) *extprocv3.ProcessingResponse {
	ex.answer.status, ex.answer.completed, ex.phase = status, true, phaseDone
	ex.log.Warn("an attempt failed in the gateway; Envoy does not retry it", zap.Int("status", status))
	var mut headers
	mut.Remove(attemptReplyHeader)
	mut.Remove(localReplyHeader)
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: mut.mutation()}},
	}}
}

// errNoAccount: a continuation in an attempt whose context did not arrive.
var errNoAccount = errors.New("the attempt has no account for previous_response_id: the upstream ext_proc filter must forward the metadata namespace")
