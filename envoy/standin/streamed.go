package standin

import (
	"errors"
	"io"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// chunk is one upstream read.
type chunk struct {
	data []byte
	err  error // io.EOF at the end
}

// bodyReader reads a body in the background, as Envoy's codec does, so
// that chunks arriving before the header reply can be coalesced.
type bodyReader struct {
	chunks chan chunk
	done   chan struct{}
}

var errTooLarge = errors.New("body over the buffer limit")

func startReader(body io.Reader, onFinish func(func())) *bodyReader {
	r := &bodyReader{chunks: make(chan chunk, 1024), done: make(chan struct{})}
	onFinish(func() { close(r.done) })
	go r.run(body)
	return r
}

func (r *bodyReader) run(body io.Reader) {
	defer close(r.chunks)
	buf := make([]byte, 16<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 && !r.put(chunk{data: append([]byte(nil), buf[:n]...)}) {
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.put(chunk{err: err})
			}
			return
		}
	}
}

func (r *bodyReader) put(c chunk) bool {
	select {
	case r.chunks <- c:
		return true
	case <-r.done:
		return false
	}
}

func (r *bodyReader) readAll(limit int64) ([]byte, error) {
	var out []byte
	for c := range r.chunks {
		if c.err != nil {
			return nil, c.err
		}
		out = append(out, c.data...)
		if int64(len(out)) > limit {
			return nil, errTooLarge
		}
	}
	return out, nil
}

// coalesced takes what has arrived so far (at least one read) as one
// chunk, and reports whether the body already ended.
func (r *bodyReader) coalesced() ([]byte, bool, error) {
	c, ok := <-r.chunks
	if !ok {
		return nil, true, nil
	}
	if c.err != nil {
		return nil, false, c.err
	}
	out := c.data
	for {
		select {
		case c, ok := <-r.chunks:
			if !ok {
				return out, true, nil
			}
			if c.err != nil {
				return nil, false, c.err
			}
			out = append(out, c.data...)
		default:
			return out, false, nil
		}
	}
}

// sent is a chunk on its way to the processor, awaiting its reply.
type sent struct {
	data   []byte
	eos    bool
	toProc bool  // sent to the processor (not after it was dropped)
	err    error // the upstream body failed
}

// streamedResponse sends chunks without waiting for replies (Envoy
// pipelines them), applies the replies one by one in order, and holds the
// response headers until the first reply.
func (x *exchange) streamedResponse(status int, h headerMap, r *bodyReader) error {
	first, ended, err := r.coalesced()
	if err != nil {
		return x.bodyError()
	}
	queue := make(chan sent, 4096)
	go x.sendChunks(r, first, ended, queue)
	for s := range queue {
		if s.err != nil {
			return x.bodyError()
		}
		out, err := x.streamReply(s)
		if err != nil {
			return err
		}
		if !x.headersSent {
			x.writeHeaders(status, h)
		}
		x.writeBody(out)
		flush(x.w)
	}
	if !x.headersSent {
		x.writeHeaders(status, h)
	}
	x.endBody()
	return nil
}

// sendChunks feeds the processor: the coalesced first chunk, then every
// later read cut by the test's splitter, then the end of stream.
func (x *exchange) sendChunks(r *bodyReader, first []byte, ended bool, queue chan<- sent) {
	defer close(queue)
	put := func(s sent) bool {
		select {
		case queue <- s:
			return true
		case <-r.done:
			return false
		}
	}
	send := func(data []byte, eos bool) bool {
		s := sent{data: data, eos: eos}
		if x.active.Load() { // once processing ended, the rest passes unmodified
			s.toProc = x.ps.send(x.ctx, bodyMessage(data, eos)) == nil
		}
		return put(s)
	}
	if ended { // the whole body arrived before the header reply
		send(first, true)
		return
	}
	if !send(first, false) {
		return
	}
	var held []byte // with dataOnFinal the last piece waits to carry end_of_stream
	holding := false
	for c := range r.chunks {
		if c.err != nil {
			put(sent{err: c.err})
			return
		}
		for _, piece := range x.split(c.data) {
			if holding && !send(held, false) {
				return
			}
			held, holding = piece, x.p.dataOnFinal
			if !holding && !send(piece, false) {
				return
			}
		}
	}
	if holding {
		send(held, true)
		return
	}
	send(nil, true) // Envoy's HTTP/1 codec ends with an empty chunk
}

func (x *exchange) split(data []byte) [][]byte {
	if x.p.split == nil {
		return [][]byte{data}
	}
	return x.p.split(data)
}

func bodyMessage(data []byte, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: data, EndOfStream: eos}}}
}

// streamReply awaits the reply for one sent chunk and returns the bytes
// that replace it. Header mutations in STREAMED body replies are ignored.
// The reply to the last chunk ends processing (the stream is closed).
func (x *exchange) streamReply(s sent) ([]byte, error) {
	if !s.toProc || !x.active.Load() {
		return s.data, nil // failed open: the rest passes unmodified
	}
	resp, err := x.receive()
	if err != nil || resp == nil {
		return s.data, err
	}
	rb, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_ResponseBody)
	if !ok || rb.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse() != nil {
		_, err := x.failed(errSpurious)
		return s.data, err
	}
	if s.eos {
		x.closeProc()
	}
	if m := rb.ResponseBody.GetResponse().GetBodyMutation(); m != nil {
		return mutatedBody(s.data, m), nil
	}
	return s.data, nil
}
