package extproc

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// goneStream is an ext_proc stream Envoy ends while the server makes its
// reply to the request body: the client left, or Envoy stopped waiting.
type goneStream struct {
	fakeStream
	cancel context.CancelFunc
}

func (g *goneStream) Recv() (*extprocv3.ProcessingRequest, error) {
	m, err := g.fakeStream.Recv()
	if m.GetRequestBody() != nil {
		g.cancel()
	}
	return m, err
}

// A request whose body reply never reached Envoy never reached the
// provider either (Envoy holds the request until that reply): it is
// recorded without the prompt the gateway would estimate for a request the
// provider had. So is one whose reply came after Envoy's message_timeout,
// which Envoy answered itself with a 504: the record says 504, as the
// client saw. Before, both were charged their prompt.
func TestRequestStoppedBeforeTheProviderIsNotCharged(t *testing.T) {
	body := reqBody(`{"model":"gpt-x","messages":[{"role":"user","content":"What is the capital of France, and why?"}]}`)
	t.Run("the stream ended while the reply was made", func(t *testing.T) {
		s, usage, _ := newFaultServer(t)
		ctx, cancel := context.WithCancel(context.Background())
		g := &goneStream{fakeStream: fakeStream{ctx: ctx, in: []*extprocv3.ProcessingRequest{reqHeaders(), body}}, cancel: cancel}
		if err := s.Process(g); err != nil {
			t.Fatal(err)
		}
		if rec := usage.only(t); rec.PromptTokens != 0 || rec.Estimated || rec.Status != 499 {
			t.Errorf("record: %d prompt tokens (estimated %v), status %d; want nothing charged, 499", rec.PromptTokens, rec.Estimated, rec.Status)
		}
	})
	t.Run("the reply came after Envoy's message_timeout", func(t *testing.T) {
		s, usage, _ := newFaultServer(t)
		s.cfg.MessageTimeout = 10 * time.Second
		var tick atomic.Int64 // each reading of the clock is 20s later: the body's work takes longer than 10s
		s.now = func() time.Time { return time.Unix(1_900_000_000+tick.Add(20), 0) }
		play(t, s, true, reqHeaders(), body) // then Envoy, having answered 504, ends the stream
		if rec := usage.only(t); rec.PromptTokens != 0 || rec.Estimated || rec.Status != 504 {
			t.Errorf("record: %d prompt tokens (estimated %v), status %d; want nothing charged, 504", rec.PromptTokens, rec.Estimated, rec.Status)
		}
	})
}
