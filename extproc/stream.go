package extproc

import (
	"context"
	"fmt"
	"net/http"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// The exchange's lifecycle: the messages of its stream in their phases,
// around each reply, and at its end.

// newExchange makes the exchange of a router-level stream.
func (s *Server) newExchange() *exchange {
	ex := &exchange{stream: stream{s: s, start: s.now(), route: route{via: direct{}}}}
	ex.kind = ex
	ex.log.init(s.log, s.cfg.RequestLogger)
	ex.meter.s, ex.meter.log, ex.meter.book = s, &ex.log, &ex.book
	return ex
}

// handle answers one message from Envoy. Every message Envoy may send in
// a phase gets its answer: a response can come at any point after the
// request headers (Envoy answers locally: a body over its buffer, a
// timeout, a connect failure), and its body after the exchange is
// settled.
func (ex *exchange) handle(ctx context.Context, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		if err := expect(&ex.phase, phaseRequestHeaders); err != nil {
			return nil, err
		}
		return ex.requestHeaders(ctx, r.RequestHeaders), nil
	case *extprocv3.ProcessingRequest_RequestBody:
		if err := expect(&ex.phase, phaseRequestBody); err != nil {
			return nil, err
		}
		return ex.requestBody(ctx, r.RequestBody), nil
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		if err := expect(&ex.phase, phaseResponseHeaders); err != nil {
			return nil, err
		}
		return ex.responseHeaders(r.ResponseHeaders, req.GetAttributes()), nil
	case *extprocv3.ProcessingRequest_ResponseBody:
		if ex.phase == phaseDone {
			return ex.answer.settledBody(ex.req.dialect), nil
		}
		if err := expect(&ex.phase, phaseResponseBody); err != nil {
			return nil, err
		}
		return ex.responseBody(ctx, r.ResponseBody), nil
	}
	return nil, fmt.Errorf("unexpected %T in phase %s (trailers are configured SKIP)", req.GetRequest(), ex.phase)
}

// expect checks the message fits the phase. A response can arrive while the
// exchange still expects a request body only when Envoy answered locally
// (for example 413 on an oversized body), so the response path is allowed
// from any earlier phase.
func expect(p *phase, want phase) error {
	switch {
	case *p == want:
		return nil
	case want == phaseResponseHeaders && *p < want:
		*p = want
		return nil
	}
	return fmt.Errorf("got %s message in phase %s", want, *p)
}

// beforeSend settles rate limits and budgets before the final reply goes
// out: a client that sees its answer end has its concurrency slot back and
// its spending counted, so sequential requests never collide.
func (ex *exchange) beforeSend(ctx context.Context) {
	defer recoverFinish(ex.s, &ex.log)
	if ex.phase == phaseDone && !ex.meter.rateSettled {
		u, _ := ex.answer.usageToCharge(&ex.req, ex.tr)
		ex.meter.settle(ctx, u.TotalTokens, func() int64 { return ex.s.spentCost(&ex.req, ex.flow, u) })
	}
}

// afterSend runs once a reply is on its way: the final reply is not delayed
// by bookkeeping.
func (ex *exchange) afterSend(ctx context.Context) {
	defer recoverFinish(ex.s, &ex.log)
	if ex.phase == phaseDone && !ex.recorded {
		ex.record(ctx)
	}
}

// lost is told that the reply to the last message never reached Envoy
// (the stream ended while it was made, or could not take it): after a
// request body's, the request never went to the provider, which then
// charges it nothing.
func (ex *exchange) lost() {
	if ex.phase == phaseResponseHeaders { // the one phase a reply that sends the request leads to
		ex.answer.delivery = unsent
	}
}

// finish runs when the stream ends, also when the client went away or
// Envoy gave up mid-answer: the exchange is recorded with what it
// consumed and the status the client saw.
func (ex *exchange) finish(ctx context.Context) {
	defer ex.book.done()
	defer recoverFinish(ex.s, &ex.log)
	if !ex.recorded && ex.phase != phaseRequestHeaders {
		if !ex.answer.completed {
			ex.answer.status = ex.answer.brokenStatus(ex.s.now(), ex.phase, ex.route.timeouts, ex.req.stream)
		}
		ex.record(ctx)
	}
}

// afterPanic answers the message whose handling panicked. Before anything
// reached the client the answer is a 500 in its API's shape; in a stream whose head
// went out, one error event ends it, and later chunks are dropped.
func (ex *exchange) afterPanic(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	body, isBody := req.GetRequest().(*extprocv3.ProcessingRequest_ResponseBody)
	if !isBody || !ex.answer.head.Stream {
		return ex.fail(errInternal(nil))
	}
	ex.answer.mode, ex.answer.status = bodyDropped, http.StatusInternalServerError
	out := streamError(ex.req.dialect, ex.tr, errInternal(nil))
	if body.ResponseBody.GetEndOfStream() {
		ex.phase = phaseDone
	}
	return bodyReply(out, true, nil)
}
