package extproc

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
	"modelgate/envoy/routing"
	"modelgate/translate"
)

// attemptStream is an upstream stream: one attempt of a Fallback model,
// from the ext_proc filter in the model cluster's upstream filter chain
// (the top of fallback.go). It translates the client's body for the
// deployment Envoy chose and names that deployment on the answer; the
// router-level stream (exchange) admits, records and translates the
// answer. The server tells the two apart by the stream's first message.
type attemptStream struct {
	stream
	a *attempt
}

func (s *Server) newAttemptStream(a *attempt) *attemptStream {
	st := &attemptStream{stream: stream{s: s, start: s.now()}, a: a}
	st.kind = st
	st.log.init(s.log, s.cfg.RequestLogger)
	return st
}

func (*attemptStream) beforeSend(context.Context) {}
func (*attemptStream) afterSend(context.Context)  {}
func (*attemptStream) lost()                      {}

// afterPanic fails the attempt with the gateway's error, which Envoy
// does not retry.
func (st *attemptStream) afterPanic(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	return st.fail(errInternal(nil))
}

// handle answers the messages of an upstream stream.
func (st *attemptStream) handle(ctx context.Context, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	st.a.readContext(req.GetMetadataContext(), st.s.cfg.MetadataNamespace)
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		if err := expect(&st.phase, phaseRequestHeaders); err != nil {
			return nil, err
		}
		return st.requestHeaders(r.RequestHeaders), nil
	case *extprocv3.ProcessingRequest_RequestBody:
		if err := expect(&st.phase, phaseRequestBody); err != nil {
			return nil, err
		}
		return st.requestBody(ctx, r.RequestBody), nil
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		if err := expect(&st.phase, phaseResponseHeaders); err != nil {
			return nil, err
		}
		return st.responseHeaders(ctx, r.ResponseHeaders), nil
	case *extprocv3.ProcessingRequest_ResponseBody:
		// The upstream filter's response body mode is NONE; a body sent
		// anyway passes unchanged (the router-level stream translates it).
		return bodyReply(nil, false, nil), nil
	}
	return nil, fmt.Errorf("unexpected %T in an upstream stream's phase %s", req.GetRequest(), st.phase)
}

// requestHeaders keeps the attempt's request headers for its body.
func (st *attemptStream) requestHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	a := st.a
	a.headers = readHeaders(h.GetHeaders())
	st.log.with(zap.String("request_id", a.headers.get(requestIDHeader)), zap.String("backend", a.backend),
		zap.Int("attempt", a.count))
	if a.err != nil {
		return st.fail(errInternal(a.err))
	}
	if h.GetEndOfStream() {
		return st.fail(errMissingBody())
	}
	st.phase = phaseRequestBody
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{},
	}}
}

// requestBody translates the client's body for the attempt's backend.
func (st *attemptStream) requestBody(ctx context.Context, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	resp, err := st.translate(ctx, b.GetBody())
	st.s.cfg.Metrics.attempted(st.req.model, st.a.backend, st.a.count)
	if err != nil {
		return st.fail(err)
	}
	st.phase = phaseResponseHeaders
	return resp
}

func (st *attemptStream) translate(ctx context.Context, body []byte) (*extprocv3.ProcessingResponse, error) {
	a := st.a
	rc := a.ctx
	if a.count <= 1 { // the first attempt sees the client's own headers
		rc.path = cmp.Or(rc.path, a.headers.get(":path"))
		rc.contentType = cmp.Or(rc.contentType, a.headers.get("content-type"))
	}
	if rc.path == "" {
		return nil, errInternal(fmt.Errorf("attempt %d carries no %s in dynamic metadata %q: the upstream ext_proc filter must forward that namespace (metadata_options.forwarding_namespaces)",
			a.count, contextPath, st.s.cfg.MetadataNamespace))
	}
	ep, err := dispatch(a.headers.get(":method"), rc.path)
	f, ok := newFlow(ep, st.s, a.headers)
	if err != nil || !ok {
		return nil, errInternal(fmt.Errorf("attempt %d: %s %s is not an endpoint with a provider", a.count, a.headers.get(":method"), rc.path))
	}
	st.req.endpoint, st.req.contentType, st.flow = ep, rc.contentType, f
	if rc.account != "" {
		st.req.principal = &authz.Principal{AccountID: rc.account}
	}
	if int64(len(body)) > st.s.bodyLimit(ep) {
		return nil, errTooLarge()
	}
	if local, err := st.flow.parse(ctx, st, body); err != nil {
		return nil, err
	} else if local != nil { // the router-level stream answers what the gateway answers itself
		return nil, errInternal(fmt.Errorf("attempt %d: a request the gateway answers itself", a.count))
	}
	up, err := st.tr.RequestBody()
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
	for _, k := range a.headers.prefixed(strippedPrefixes[:1]) { // the gateway's: the router-level stream stripped the rest
		h.Remove(k)
	}
	st.log.Debug("attempt translated", zap.String("provider", st.route.target.Provider), zap.String("path", up.Path))
	return sendUpstream(&h, up, a.headers.get(":path"), a.headers.get("content-type")), nil
}

// pick routes an attempt to the deployment Envoy chose. The
// router-level stream checked the key and its models; the model is
// looked up again only to find the deployment.
func (st *attemptStream) pick(ctx context.Context, model string, _ *asks) error {
	m, _ := st.s.router.resolve(model)
	if m == nil {
		return errModelNotFound(model)
	}
	d, ok := deploymentOn(m, st.a.backend)
	if !ok {
		return errInternal(fmt.Errorf("envoy chose backend %q, which does not serve model %q", st.a.backend, model))
	}
	r, err := st.s.deploy(ctx, m, d)
	if err != nil {
		return err
	}
	st.req.model, st.route = m.ID, r
	st.log.with(zap.String("provider", r.target.Provider), zap.String("model", m.ID))
	return nil
}

// translator makes the attempt's translator.
func (st *attemptStream) translator(build builder) error {
	tr, err := build(st.route.provider, st.route.target)
	st.tr = tr
	return err
}

// responseHeaders names the attempt's backend on its response, for the
// router-level stream. The marks of replies that are not a provider's are
// removed: a provider cannot pass for Envoy or for the gateway.
func (st *attemptStream) responseHeaders(ctx context.Context, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	st.a.answered = true
	if status, _ := strconv.Atoi(readHeaders(h.GetHeaders()).get(":status")); status < 200 || status > 299 {
		st.record(ctx, status)
	}
	var mut headers
	mut.Remove(routing.LocalReplyHeader)
	mut.Remove(attemptReplyHeader)
	mut.Set(deploymentHeader, st.a.backend)
	st.phase = phaseDone
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: mut.mutation()}},
	}}
}

// fail ends the attempt with an error in its client's dialect, marked for the router-level stream (attemptError).
func (st *attemptStream) fail(err error) *extprocv3.ProcessingResponse {
	apiErr := toAPIError(err)
	logFailure(&st.log, apiErr, err)
	st.phase = phaseDone
	return attemptError(apiErr, dialectOf(st.req.endpoint, st.a.headers))
}

// finish records an attempt that was translated and sent and got no
// answer: refused, reset or timed out.
func (st *attemptStream) finish(ctx context.Context) {
	defer st.book.done()
	defer recoverFinish(st.s, &st.log)
	if !st.a.answered && st.phase == phaseResponseHeaders {
		st.record(ctx, 0)
	}
}

// record writes a failed attempt's record to the ledger: its backend and
// status (0: no answer), no tokens. The request's own record, which
// charges the deployment that answered, is the router-level stream's.
func (st *attemptStream) record(ctx context.Context, status int) {
	a := st.a
	if a.recorded || st.tr == nil {
		return // not translated: the attempt never reached the provider
	}
	a.recorded = true
	end := st.s.now()
	rec := ledger.UsageRecord{RequestID: a.headers.get(requestIDHeader), ClientRequestID: a.ctx.clientID, AccountID: a.ctx.account, Endpoint: st.req.endpoint.String(),
		Model: st.req.model, Backend: a.backend, Status: status, Attempt: max(a.count, 1), Duration: end.Sub(st.start), At: end}
	rec.Cost, rec.CostKnown = st.s.cost(st.req.model, pricing.Usage{}, end) // no tokens: nothing, where the model has a price
	if err := st.s.usage.AppendUsage(st.book.context(ctx, st.s.cfg.UsageTimeout), rec); err != nil {
		st.log.Error("recording a failed attempt", zap.Error(err))
	}
}

// attempt is what Envoy tells an upstream stream of its attempt.
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

// attemptError is an upstream stream's error reply: the OpenAI error,
// marked so that the router-level stream passes it on as it is.
func attemptError(e *APIError, d *dialect) *extprocv3.ProcessingResponse {
	resp := errorResponse(e, d.errorBody(e))
	ir := resp.GetImmediateResponse()
	ir.Headers.SetHeaders = append(ir.Headers.SetHeaders, &corev3.HeaderValueOption{
		Header: &corev3.HeaderValue{Key: attemptReplyHeader, RawValue: []byte(ir.GetDetails())},
	})
	return resp
}
