package standin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Ways a processor can fail, as Envoy's ext_proc.cc reports them.
var (
	errTimeout = errors.New("ext_proc_error_per-message_timeout_exceeded")
	// errClosed is a clean OK close: Envoy continues without ext_proc.
	errClosed = errors.New("ext_proc stream closed")
	// errSpurious is a reply Envoy was not waiting for (processor_state.cc).
	errSpurious = errors.New("spurious message")
	// errUnhandled is a reply with no case set (onReceiveMessage's default).
	errUnhandled = errors.New("unhandled message")
)

// grpcError is the stream failing: onGrpcError's details are
// ext_proc_error_gRPC_error_<code>{<message>}.
type grpcError struct{ err error }

func (e *grpcError) Error() string {
	s := status.Convert(e.err)
	return fmt.Sprintf("ext_proc_error_gRPC_error_%d{%s}", s.Code(), s.Message())
}

type reply struct {
	resp *extprocv3.ProcessingResponse
	err  error
}

// procStream is one ext_proc stream, opened lazily at the first message.
type procStream struct {
	conn     *grpc.ClientConn
	cluster  *cluster // the ext_proc cluster, for its circuit breakers
	slot     bool     // the stream holds one of them
	fc       *filterConfig
	mode     *filterv3.ProcessingMode // the configured modes, for protocol_config
	stream   extprocv3.ExternalProcessor_ProcessClient
	cancel   context.CancelFunc
	cancelFn atomic.Pointer[context.CancelFunc] // cancel, for close without the lock
	replies  chan reply
	done     chan struct{}
	sent     bool
	mu       sync.Mutex // send and close may come from two goroutines
	closed   bool
	// pending counts messages sent and not answered yet: a reply with
	// nothing pending is spurious (or an immediate response).
	pending atomic.Int64
	// unsolicited gets what arrives while nothing is pending, after the
	// replies before it were taken.
	unsolicited func(*extprocv3.ProcessingResponse, error)
	// metadata is the metadata_context of each message (nil: empty).
	metadata func() *corev3.Metadata
}

// Envoy's gRPC client has no message size limit by default; Go's is 4 MiB.
var callOptions = []grpc.CallOption{grpc.MaxCallRecvMsgSize(1 << 30), grpc.MaxCallSendMsgSize(1 << 30)}

// errOverflow is the ext_proc cluster's circuit breaker refusing a
// stream: Envoy's gRPC client gets the router's 503 "reset reason:
// overflow", which becomes UNAVAILABLE with that message.
var errOverflow = &grpcError{status.Error(codes.Unavailable, "upstream connect error or disconnect/reset before headers. reset reason: overflow")}

func (s *procStream) open(ctx context.Context) error {
	if !s.cluster.acquire() {
		return errOverflow
	}
	s.slot = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.cancelFn.Store(&s.cancel)
	st, err := extprocv3.NewExternalProcessorClient(s.conn).Process(ctx, callOptions...)
	if err != nil {
		s.cancel()
		return &grpcError{err}
	}
	s.stream, s.replies, s.done = st, make(chan reply, 1024), make(chan struct{})
	go s.receive(st, s.done)
	return nil
}

func (s *procStream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *procStream) receive(st extprocv3.ExternalProcessor_ProcessClient, done chan struct{}) {
	for {
		resp, err := st.Recv()
		if s.isClosed() {
			return
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errClosed
			} else if status.Code(err) != codes.OK {
				err = &grpcError{err}
			}
			if s.pending.Load() > 0 {
				s.deliver(reply{err: err}, done)
			} else if s.drained(done) {
				s.unsolicited(nil, err)
			}
			return
		}
		switch {
		case resp.GetOverrideMessageTimeout() != nil:
			if s.pending.Load() > 0 { // a timer extension; with nothing pending there is no timer
				s.deliver(reply{resp: resp}, done)
			}
		case s.pending.Load() == 0:
			if s.drained(done) {
				s.unsolicited(resp, nil)
			}
		default:
			if resp.GetImmediateResponse() == nil {
				s.pending.Add(-1)
			}
			if !s.deliver(reply{resp: resp}, done) {
				return
			}
		}
	}
}

// drained waits until the request took every reply delivered before, so
// that Envoy's order (each reply applied as it arrives) is kept.
func (s *procStream) drained(done chan struct{}) bool {
	for len(s.replies) > 0 {
		select {
		case <-done:
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return !s.isClosed()
}

func (s *procStream) deliver(r reply, done chan struct{}) bool {
	select {
	case s.replies <- r:
		return true
	case <-done:
		return false
	}
}

// send sends one message; the first carries protocol_config.
func (s *procStream) send(ctx context.Context, req *extprocv3.ProcessingRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if s.stream == nil {
		if err := s.open(ctx); err != nil {
			return err
		}
	}
	req.MetadataContext = &corev3.Metadata{}
	if s.metadata != nil {
		req.MetadataContext = s.metadata()
	}
	if !s.sent {
		req.ProtocolConfig = &extprocv3.ProtocolConfiguration{
			RequestBodyMode:  s.mode.GetRequestBodyMode(),
			ResponseBodyMode: s.mode.GetResponseBodyMode(),
		}
		s.sent = true
	}
	s.pending.Add(1)
	if err := s.stream.Send(req); err != nil {
		s.pending.Add(-1)
		return &grpcError{err}
	}
	return nil
}

// await returns the next reply. A reply with override_message_timeout only
// restarts the timer (once, within max_message_timeout); its other fields
// are ignored. Replies already delivered come before an interrupt.
func (s *procStream) await(ctx context.Context, intr <-chan struct{}) (*extprocv3.ProcessingResponse, error) {
	timer := time.NewTimer(s.fc.messageTimeout)
	defer timer.Stop()
	extended := false
	for {
		var r reply
		select {
		case r = <-s.replies:
		default:
			select {
			case r = <-s.replies:
			case <-timer.C:
				return nil, errTimeout
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-intr:
				return nil, errInterrupted
			}
		}
		if r.err != nil {
			return nil, r.err
		}
		if d := r.resp.GetOverrideMessageTimeout(); d != nil {
			if !extended && s.fc.maxMessageTimeout > 0 && d.AsDuration() >= time.Millisecond && d.AsDuration() <= s.fc.maxMessageTimeout {
				extended = true
				timer.Reset(d.AsDuration())
			}
			continue
		}
		return r.resp, nil
	}
}

// close half-closes and then cancels, as Envoy does. A send blocked by
// flow control holds the lock: then cancel first, which ends it.
func (s *procStream) close() {
	if !s.mu.TryLock() {
		if c := s.cancelFn.Load(); c != nil {
			(*c)()
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	s.closed = true
	if s.slot {
		s.slot = false
		s.cluster.release()
	}
	if s.stream == nil {
		return
	}
	s.stream.CloseSend() //nolint:errcheck // cancelled next anyway
	s.cancel()
	close(s.done)
	s.stream = nil
}

// detailsOf is what Envoy's sendImmediateResponse makes of a message:
// whitespace becomes '_' (StringUtil::replaceAllEmptySpace).
func detailsOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v' {
			return '_'
		}
		return r
	}, s)
}
