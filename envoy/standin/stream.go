package standin

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Ways a processor can fail; see ENVOY_EXTPROC.md §4.
var (
	errTimeout = errors.New("ext_proc_error_per-message_timeout_exceeded")
	// errClosed is a clean OK close: Envoy continues without ext_proc.
	errClosed = errors.New("ext_proc stream closed")
)

type grpcError struct{ err error }

func (e *grpcError) Error() string {
	return "ext_proc_error_gRPC_error_" + status.Code(e.err).String()
}

type reply struct {
	resp *extprocv3.ProcessingResponse
	err  error
}

// procStream is one ext_proc stream, opened lazily at the first message.
type procStream struct {
	conn    *grpc.ClientConn
	fc      *filterConfig
	mode    *filterv3.ProcessingMode // the configured modes, for protocol_config
	stream  extprocv3.ExternalProcessor_ProcessClient
	cancel  context.CancelFunc
	replies chan reply
	done    chan struct{}
	sent    bool
	mu      sync.Mutex // send and close may come from two goroutines
	closed  bool
}

func (s *procStream) open(ctx context.Context) error {
	ctx, s.cancel = context.WithCancel(ctx)
	st, err := extprocv3.NewExternalProcessorClient(s.conn).Process(ctx,
		grpc.MaxCallRecvMsgSize(1<<30), grpc.MaxCallSendMsgSize(1<<30))
	if err != nil {
		s.cancel()
		return &grpcError{err}
	}
	s.stream, s.replies, s.done = st, make(chan reply, 64), make(chan struct{})
	go s.receive(st)
	return nil
}

func (s *procStream) receive(st extprocv3.ExternalProcessor_ProcessClient) {
	for {
		resp, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errClosed
			} else if status.Code(err) != codes.OK {
				err = &grpcError{err}
			}
			s.deliver(reply{err: err})
			return
		}
		if !s.deliver(reply{resp: resp}) {
			return
		}
	}
}

func (s *procStream) deliver(r reply) bool {
	select {
	case s.replies <- r:
		return true
	case <-s.done:
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
	if !s.sent {
		req.ProtocolConfig = &extprocv3.ProtocolConfiguration{
			RequestBodyMode:  s.mode.GetRequestBodyMode(),
			ResponseBodyMode: s.mode.GetResponseBodyMode(),
		}
		s.sent = true
	}
	if err := s.stream.Send(req); err != nil {
		return &grpcError{err}
	}
	return nil
}

// await returns the next reply. A reply with override_message_timeout only
// restarts the timer (once, within max_message_timeout); its other fields
// are ignored.
func (s *procStream) await(ctx context.Context) (*extprocv3.ProcessingResponse, error) {
	timer := time.NewTimer(s.fc.messageTimeout)
	defer timer.Stop()
	extended := false
	for {
		select {
		case r := <-s.replies:
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
		case <-timer.C:
			return nil, errTimeout
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// close half-closes and then cancels, as Envoy does.
func (s *procStream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.stream == nil {
		return
	}
	s.stream.CloseSend() //nolint:errcheck // cancelled next anyway
	s.cancel()
	close(s.done)
	s.stream = nil
}
