package standin

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// streamedReply switches the response body to STREAMED.
func streamedReply(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	if req.GetResponseHeaders() == nil {
		return nil
	}
	r := defaultReply(req)
	r.ModeOverride = &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_STREAMED}
	return r
}

func everyNBytes(n int) func([]byte) [][]byte {
	return func(b []byte) [][]byte {
		var out [][]byte
		for len(b) > n {
			out = append(out, b[:n])
			b = b[n:]
		}
		return append(out, b)
	}
}

func chunks(p *stubProc) []*extprocv3.HttpBody {
	var out []*extprocv3.HttpBody
	for _, m := range p.messages() {
		if b := m.GetResponseBody(); b != nil {
			out = append(out, b)
		}
	}
	return out
}

// slowUpstream writes its body in two parts with a pause, so that the
// second part arrives after the header reply.
func slowUpstream(first, second string) *upstreamRecorder {
	return &upstreamRecorder{handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		time.Sleep(100 * time.Millisecond)
		io.WriteString(w, second)
	}}
}

// STREAMED bodies: arbitrary cuts, pipelining, the empty final chunk.
func TestMust05Streamed(t *testing.T) {
	t.Run("arbitrary splits and the empty final chunk", func(t *testing.T) {
		p := &stubProc{reply: streamedReply}
		e := start(t, p, slowUpstream("data: ’a\n\n", "data: b\n\n"), nil, WithResponseSplitter(everyNBytes(3)))
		r := e.do(t, "GET", "/", "", nil)
		e.entry(t)
		cs := chunks(p)
		var joined []byte
		for _, c := range cs[:len(cs)-1] {
			joined = append(joined, c.Body...)
			if c.EndOfStream {
				t.Error("end_of_stream before the last chunk")
			}
		}
		last := cs[len(cs)-1]
		if string(joined) != "data: ’a\n\ndata: b\n\n" || len(last.Body) != 0 || !last.EndOfStream || r.body != string(joined) {
			t.Errorf("chunks %q + last %v; client got %q", joined, last, r.body)
		}
		if len(cs) < 5 {
			t.Errorf("%d chunks, want the later part split every 3 bytes", len(cs))
		}
	})
	t.Run("data on the final chunk", func(t *testing.T) {
		p := &stubProc{reply: streamedReply}
		e := start(t, p, slowUpstream("data: a\n\n", "data: b\n\n"), nil, WithDataOnFinalChunk())
		e.do(t, "GET", "/", "", nil)
		e.entry(t)
		cs := chunks(p)
		if last := cs[len(cs)-1]; string(last.Body) != "data: b\n\n" || !last.EndOfStream {
			t.Errorf("last chunk = %v, want data with end_of_stream", last)
		}
	})
	t.Run("replies replace chunks in order", func(t *testing.T) {
		p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			if b := req.GetResponseBody(); b != nil {
				return bodyReplyWith(bytes.ToUpper(b.Body))
			}
			return streamedReply(req)
		}}
		e := start(t, p, slowUpstream("data: a\n\n", "data: b\n\n"), nil, WithResponseSplitter(everyNBytes(4)))
		if r := e.do(t, "GET", "/", "", nil); r.body != "DATA: A\n\nDATA: B\n\n" || r.header.Get("Content-Length") != "" {
			t.Errorf("client got %q (content-length %q)", r.body, r.header.Get("Content-Length"))
		}
		e.entry(t)
	})
	t.Run("pipelined: chunk n+1 is sent before reply n", func(t *testing.T) {
		var mu sync.Mutex
		received := 0
		p := &stubProc{process: func(s extprocv3.ExternalProcessor_ProcessServer) error {
			var pending []*extprocv3.ProcessingRequest
			for {
				req, err := s.Recv()
				if err != nil {
					return nil
				}
				if req.GetResponseBody() == nil {
					s.Send(orDefault(streamedReply(req), req))
					continue
				}
				mu.Lock()
				received++
				mu.Unlock()
				pending = append(pending, req)
				if len(pending) < 2 && !req.GetResponseBody().EndOfStream {
					continue // hold the reply to the first chunk until the second arrives
				}
				for _, r := range pending {
					s.Send(bodyReplyWith(r.GetResponseBody().Body))
				}
				pending = nil
			}
		}}
		e := start(t, p, slowUpstream("data: a\n\n", "data: b\n\ndata: c\n\n"), nil, WithResponseSplitter(everyNBytes(5)))
		if r := e.do(t, "GET", "/", "", nil); r.body != "data: a\n\ndata: b\n\ndata: c\n\n" {
			t.Errorf("client got %q: the stand-in waited for a reply before sending the next chunk", r.body)
		}
		e.entry(t)
	})
	t.Run("chunks before the header reply are coalesced", func(t *testing.T) {
		p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			if req.GetResponseHeaders() != nil {
				time.Sleep(200 * time.Millisecond) // the whole body arrives meanwhile
			}
			return streamedReply(req)
		}}
		e := start(t, p, slowUpstream("data: a\n\n", "data: b\n\n"), nil, WithResponseSplitter(everyNBytes(2)))
		e.do(t, "GET", "/", "", nil)
		e.entry(t)
		cs := chunks(p)
		if len(cs) != 1 || string(cs[0].Body) != "data: a\n\ndata: b\n\n" || !cs[0].EndOfStream {
			t.Errorf("chunks = %v, want one coalesced chunk with end_of_stream", cs)
		}
	})
	t.Run("headers are held until the first chunk reply", func(t *testing.T) {
		release := make(chan struct{})
		p := &stubProc{reply: func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
			if req.GetResponseBody() != nil {
				<-release
			}
			return streamedReply(req)
		}}
		e := start(t, p, slowUpstream("data: a\n\n", ""), nil)
		got := make(chan response, 1)
		go func() { got <- e.do(t, "GET", "/", "", nil) }()
		select {
		case <-got:
			t.Error("the client had the response before the first chunk reply")
		case <-time.After(150 * time.Millisecond):
		}
		close(release)
		if r := <-got; r.status != 200 || r.body != "data: a\n\n" {
			t.Errorf("response = %d %q", r.status, r.body)
		}
		e.entry(t)
	})
}

func orDefault(r *extprocv3.ProcessingResponse, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	if r == nil {
		return defaultReply(req)
	}
	return r
}

var _ = strings.Contains
