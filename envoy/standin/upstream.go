package standin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// forward runs the router: a direct response, or the upstream call.
func (x *exchange) forward() error {
	r := x.route
	switch {
	case r == nil:
		return &localReply{status: http.StatusNotFound, details: "route_not_found", flags: []string{"NR"}}
	case r.GetDirectResponse() != nil:
		x.entry.Route = r.GetName()
		return directResponse(r)
	}
	x.entry.Route, x.entry.Cluster = r.GetName(), r.GetRoute().GetCluster()
	resp, err := x.callUpstream(r.GetRoute())
	if err != nil {
		return err
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
	x.timers.upstreamHeaders()
	eos := resp.ContentLength == 0 || x.r.Method == http.MethodHead ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	if eos {
		x.timers.upstreamComplete()
	}
	return x.respond(resp.StatusCode, h, resp.Body, eos)
}

func directResponse(r *routev3.Route) *localReply {
	dr := r.GetDirectResponse()
	lr := &localReply{status: int(dr.GetStatus()), body: dr.GetBody().GetInlineString(), details: "direct_response"}
	for _, o := range r.GetResponseHeadersToAdd() {
		lr.headers = addHeader(lr.headers, o, o.GetHeader().GetValue())
	}
	return lr
}

// addHeader applies a HeaderValueOption with the given (formatted) value,
// as Envoy's HeaderParser does.
func addHeader(h headerMap, o *corev3.HeaderValueOption, value string) headerMap {
	key := strings.ToLower(o.GetHeader().GetKey())
	if value == "" && !o.GetKeepEmptyValue() {
		return h
	}
	_, exists := h.get(key)
	switch o.GetAppendAction() {
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
		return h.set(key, value)
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		if exists {
			return h.set(key, value)
		}
		return h
	case corev3.HeaderValueOption_ADD_IF_ABSENT:
		if exists {
			return h
		}
	}
	return append(h, header{key, value})
}

// routeTimeouts are the router's timeouts for a route (router.cc,
// FilterUtility::finalTimeout): the route timeout defaults to 15s, and a
// per_try_timeout not below it is ignored.
type routeTimeouts struct{ route, perTry, perTryIdle time.Duration }

func timeoutsOf(ra *routev3.RouteAction) routeTimeouts {
	t := routeTimeouts{route: 15 * time.Second}
	if d := ra.GetTimeout(); d != nil {
		t.route = d.AsDuration()
	}
	if d := ra.GetRetryPolicy().GetPerTryTimeout(); d != nil {
		t.perTry = d.AsDuration()
	}
	if t.route > 0 && t.perTry >= t.route {
		t.perTry = 0
	}
	if d := ra.GetRetryPolicy().GetPerTryIdleTimeout(); d != nil {
		t.perTryIdle = d.AsDuration()
	}
	return t
}

func (x *exchange) cancelUpstream() {
	if x.upCancel != nil {
		x.upCancel()
	}
}

func (x *exchange) callUpstream(ra *routev3.RouteAction) (*http.Response, error) {
	c := x.p.plan.clusters[ra.GetCluster()]
	if !c.acquire() { // the circuit breakers (conn_pool_base.cc, newStreamImpl)
		return nil, resetBeforeHeaders(http.StatusServiceUnavailable, "overflow", "", "UO")
	}
	x.onFinish(c.release)
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
	x.upCancel = cancel
	x.onFinish(cancel)
	x.intr.setUpstream(cancel)
	t := timeoutsOf(ra)
	x.timers.startRoute(t.route)
	// The per-try timers start, and request_timeout stops, once the whole
	// request went upstream.
	sent := &once{f: func() {
		x.timers.disarmRequest()
		x.timers.startPerTry(t.perTry, t.perTryIdle)
	}}
	body, length, closeConn := x.upstreamBody(ctx, sent.run)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { sent.run() }})
	req, err := http.NewRequestWithContext(ctx, method, scheme+"://"+host+path, body)
	if err != nil {
		return nil, &localReply{status: http.StatusBadRequest, details: "invalid_request"}
	}
	req.Host, req.ContentLength, req.Close = host, length, closeConn
	if length == 0 {
		req.Body = nil
	}
	remove := map[string]bool{}
	for _, name := range x.route.GetRequestHeadersToRemove() { // after route selection, as finalizeRequestHeaders does
		remove[strings.ToLower(name)] = true
	}
	for _, e := range x.headers {
		if !strings.HasPrefix(e.key, ":") && e.key != "content-length" && !remove[e.key] {
			req.Header.Add(e.key, e.value)
		}
	}
	if expected := cmpOr(t.perTry, t.route); expected > 0 && !x.p.plan.suppressHdrs {
		req.Header.Set("x-envoy-expected-rq-timeout-ms", strconv.FormatInt(expected.Milliseconds(), 10))
	}
	start := time.Now()
	resp, err := x.p.transports[c.name].RoundTrip(req)
	if err != nil {
		if c := x.intr.take(); c != nil {
			return nil, c
		}
		if x.ctx.Err() != nil {
			return nil, errAbort
		}
		return nil, upstreamFailure(err)
	}
	resp.Body = upstreamResponseBody{resp.Body, x.timers}
	if !x.p.plan.suppressHdrs {
		resp.Header.Set("x-envoy-upstream-service-time", strconv.FormatInt(time.Since(start).Milliseconds(), 10))
	}
	return resp, nil
}

func cmpOr(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// upstreamBody is the request body as Envoy forwards it: the
// content-length in the headers goes upstream as it is, never recomputed
// (ext_proc may have set it). Without one the body is chunked. A shorter
// declared length leaves the rest on the connection (closed here); a
// longer one leaves the upstream waiting for bytes that never come.
func (x *exchange) upstreamBody(ctx context.Context, sent func()) (io.Reader, int64, bool) {
	cl, ok := x.headers.get("content-length")
	n, err := strconv.ParseInt(cl, 10, 64)
	switch {
	case !ok || err != nil || n < 0:
		if len(x.body) == 0 && !x.hasBody {
			return nil, 0, false
		}
		return bytes.NewReader(x.body), -1, false
	case n == int64(len(x.body)):
		return bytes.NewReader(x.body), n, false
	case n < int64(len(x.body)):
		return bytes.NewReader(x.body[:n]), n, true
	}
	return &stallingBody{data: x.body, ctx: ctx, sent: sent}, n, true
}

// stallingBody gives its bytes, then blocks until the call ends.
type stallingBody struct {
	data []byte
	ctx  context.Context
	sent func()
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if len(b.data) > 0 {
		n := copy(p, b.data)
		b.data = b.data[n:]
		return n, nil
	}
	b.sent()
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

// upstreamFailure is the router's reply when the upstream call fails
// before response headers (router.cc, onUpstreamReset): the reset reason
// Envoy's HTTP/1 codec client reports (codec_client.cc) and its flag.
func upstreamFailure(err error) *localReply {
	var dnsErr *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &dnsErr): // a DNS cluster without hosts
		return &localReply{status: http.StatusServiceUnavailable, body: "no healthy upstream", details: "no_healthy_upstream", flags: []string{"UH"}}
	case errors.As(err, &op) && op.Op == "dial":
		var errno syscall.Errno
		transport := ""
		if errors.As(err, &errno) {
			msg := errno.Error()
			transport = "delayed connect error: " + strings.ToUpper(msg[:1]) + msg[1:]
		}
		return resetBeforeHeaders(http.StatusServiceUnavailable, "remote connection failure", transport, "UF")
	case errors.Is(err, io.ErrUnexpectedEOF): // part of the headers, then the close
		return resetBeforeHeaders(http.StatusBadGateway, "protocol error", "", "UPE")
	}
	return resetBeforeHeaders(http.StatusServiceUnavailable, "connection termination", "", "UC")
}

func resetBeforeHeaders(status int, reason, transport, flag string) *localReply {
	body := "upstream connect error or disconnect/reset before headers. reset reason: " + reason
	details := reason
	if transport != "" {
		body += ", transport failure reason: " + transport
		details += "|" + transport
	}
	return &localReply{status: status, body: body, details: "upstream_reset_before_response_started{" + detailsOf(details) + "}", flags: []string{flag}}
}

// upstreamResponseBody feeds the router's timers: every byte restarts
// per_try_idle_timeout and the stream idle timer, the end stops the route
// timeout.
type upstreamResponseBody struct {
	io.ReadCloser
	t *timers
}

func (b upstreamResponseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.t.upstreamActivity()
	}
	if errors.Is(err, io.EOF) {
		b.t.upstreamComplete()
	}
	return n, err
}

// bytesBody is a local reply's body as a reader.
type bytesBody struct{ *bytes.Reader }

func newBytesBody(b []byte) io.Reader { return bytesBody{bytes.NewReader(b)} }
