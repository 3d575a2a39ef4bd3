package standin

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// forward runs the router: a direct response, or the upstream call.
func (x *exchange) forward() {
	r := x.route
	switch {
	case r == nil:
		x.stop(&localReply{status: http.StatusNotFound, details: "route_not_found"})
		return
	case r.GetDirectResponse() != nil:
		x.entry.Route = r.GetName()
		x.stop(directResponse(r))
		return
	}
	x.entry.Route, x.entry.Cluster = r.GetName(), r.GetRoute().GetCluster()
	resp, err := x.callUpstream(r.GetRoute())
	if err != nil {
		x.stop(err)
		return
	}
	defer resp.Body.Close()
	h := headerMap{}
	for name, values := range resp.Header {
		for _, v := range values {
			h = append(h, header{strings.ToLower(name), v})
		}
	}
	if resp.ContentLength >= 0 {
		h = h.set("content-length", strconv.FormatInt(resp.ContentLength, 10))
	}
	x.respond(resp.StatusCode, h, resp.Body)
}

func directResponse(r *routev3.Route) *localReply {
	dr := r.GetDirectResponse()
	lr := &localReply{status: int(dr.GetStatus()), body: dr.GetBody().GetInlineString(), details: "direct_response"}
	if lr.body != "" {
		lr.headers = headerMap{{"content-type", "text/plain"}}
	}
	for _, o := range r.GetResponseHeadersToAdd() {
		lr.headers = addHeader(lr.headers, o)
	}
	return lr
}

// addHeader applies a route's response_headers_to_add entry.
func addHeader(h headerMap, o *corev3.HeaderValueOption) headerMap {
	key, value := strings.ToLower(o.GetHeader().GetKey()), o.GetHeader().GetValue()
	switch o.GetAppendAction() {
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
		return h.set(key, value)
	case corev3.HeaderValueOption_ADD_IF_ABSENT:
		if _, ok := h.get(key); ok {
			return h
		}
	}
	return append(h, header{key, value})
}

func (x *exchange) callUpstream(ra *routev3.RouteAction) (*http.Response, error) {
	c := x.p.plan.clusters[ra.GetCluster()]
	method, _ := x.headers.get(":method")
	path, _ := x.headers.get(":path")
	host, _ := x.headers.get(":authority")
	if lit := ra.GetHostRewriteLiteral(); lit != "" {
		host = lit
	}
	if p := ra.GetPrefixRewrite(); p != "" && x.route.GetMatch().GetPrefix() != "" {
		path = p + strings.TrimPrefix(path, x.route.GetMatch().GetPrefix())
	}
	scheme := "http"
	if c.tls != nil {
		scheme = "https"
	}
	ctx, cancel := context.WithCancel(x.ctx)
	x.onFinish(cancel)
	x.idle = newIdleTimer(x.p.plan.idleTimeout, cancel)
	x.onFinish(x.idle.stop)
	if d := ra.GetTimeout(); d != nil && d.AsDuration() > 0 {
		ctx, cancel = context.WithTimeout(ctx, d.AsDuration())
		x.onFinish(cancel)
	}
	req, err := http.NewRequestWithContext(ctx, method, scheme+"://"+host+path, bytes.NewReader(x.body))
	if err != nil {
		return nil, &localReply{status: http.StatusBadRequest, details: "invalid_request"}
	}
	req.Host = host
	req.ContentLength = int64(len(x.body))
	for _, e := range x.headers {
		if !strings.HasPrefix(e.key, ":") && e.key != "content-length" {
			req.Header.Add(e.key, e.value)
		}
	}
	start := time.Now()
	resp, err := x.p.transports[c.name].RoundTrip(req)
	if err != nil {
		if x.idle.fired() {
			return nil, &localReply{status: http.StatusRequestTimeout, body: "stream timeout", details: "stream_idle_timeout"}
		}
		return nil, upstreamFailure(x.ctx, err)
	}
	resp.Body = x.idle.wrap(resp.Body)
	if !x.p.plan.suppressHdrs {
		resp.Header.Set("x-envoy-upstream-service-time", strconv.FormatInt(time.Since(start).Milliseconds(), 10))
	}
	return resp, nil
}

func upstreamFailure(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return errAbort
	case strings.Contains(err.Error(), "deadline exceeded"):
		return &localReply{status: http.StatusGatewayTimeout, body: "upstream request timeout", details: "upstream_response_timeout"}
	}
	return &localReply{status: http.StatusServiceUnavailable,
		body:    "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
		details: "upstream_reset_before_response_started{connection_failure}"}
}

// bytesBody is a local reply's body as a reader.
type bytesBody struct{ *bytes.Reader }

func newBytesBody(b []byte) io.Reader { return bytesBody{bytes.NewReader(b)} }

// idleTimer is the connection manager's stream_idle_timeout: no bytes from
// the upstream for that long cancel the stream (408 before the response
// started, a reset after).
type idleTimer struct {
	d       time.Duration
	t       *time.Timer
	mu      sync.Mutex
	expired bool
}

func newIdleTimer(d time.Duration, cancel context.CancelFunc) *idleTimer {
	it := &idleTimer{d: d}
	if d > 0 {
		it.t = time.AfterFunc(d, func() {
			it.mu.Lock()
			it.expired = true
			it.mu.Unlock()
			cancel()
		})
	}
	return it
}

func (it *idleTimer) fired() bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.expired
}

func (it *idleTimer) stop() {
	if it.t != nil {
		it.t.Stop()
	}
}

func (it *idleTimer) wrap(body io.ReadCloser) io.ReadCloser {
	if it.t == nil {
		return body
	}
	return idleBody{body, it}
}

// idleBody restarts the idle timer on every read that brings bytes.
type idleBody struct {
	io.ReadCloser
	it *idleTimer
}

func (b idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.it.t.Reset(b.it.d)
	}
	return n, err
}
