package extproc

import (
	"context"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"

	"modelgate/translate"
)

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

// bookkeeping is the stream's bookkeeping context (bookkeeping.context).
func (st *stream) bookkeeping(ctx context.Context) context.Context {
	return st.book.context(ctx, st.s.cfg.UsageTimeout)
}
