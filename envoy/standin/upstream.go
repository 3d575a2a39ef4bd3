package standin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

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

func cmpOr(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// upstreamBody is an attempt's request body as Envoy forwards it: the
// content-length in the headers goes upstream as it is, never recomputed
// (ext_proc may have set it). Without one the body is chunked. A shorter
// declared length leaves the rest on the connection (closed here); a
// longer one leaves the upstream waiting for bytes that never come.
func (x *exchange) upstreamBody(ctx context.Context, body []byte, sent func()) (io.Reader, int64, bool) {
	cl, ok := x.headers.get("content-length")
	n, err := strconv.ParseInt(cl, 10, 64)
	switch {
	case !ok || err != nil || n < 0:
		if len(body) == 0 && !x.hasBody {
			return nil, 0, false
		}
		return bytes.NewReader(body), -1, false
	case n == int64(len(body)):
		return bytes.NewReader(body), n, false
	case n < int64(len(body)):
		return bytes.NewReader(body[:n]), n, true
	}
	return &stallingBody{data: body, ctx: ctx, sent: sent}, n, true
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

// upstreamFailure classifies an attempt failing before response headers
// (router.cc, onUpstreamReset): the reset reason Envoy's HTTP/1 codec
// client reports (codec_client.cc) and its flag. A DNS name without
// addresses is a final "no healthy upstream" (nil reset).
func upstreamFailure(err error, started bool) (*attemptReset, *localReply) {
	var dnsErr *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &dnsErr): // a DNS cluster without hosts
		return nil, noHealthyUpstream()
	case errors.As(err, &op) && op.Op == "dial":
		var errno syscall.Errno
		transport := ""
		if errors.As(err, &errno) {
			msg := errno.Error()
			transport = "delayed connect error: " + strings.ToUpper(msg[:1]) + msg[1:]
		}
		return &attemptReset{kind: resetConnectFailure, status: http.StatusServiceUnavailable, reason: "remote connection failure",
			transport: transport, flag: "UF"}, nil
	case errors.Is(err, io.ErrUnexpectedEOF): // part of the headers, then the close
		return &attemptReset{kind: resetRemote, started: started, status: http.StatusBadGateway, reason: "protocol error", flag: "UPE"}, nil
	}
	return &attemptReset{kind: resetRemote, started: started, status: http.StatusServiceUnavailable, reason: "connection termination", flag: "UC"}, nil
}

// noHealthyUpstream is the router's reply when the load balancer finds no
// host (sendNoHealthyUpstreamResponse).
func noHealthyUpstream() *localReply {
	return &localReply{status: http.StatusServiceUnavailable, body: "no healthy upstream", details: "no_healthy_upstream", flags: []string{"UH"}}
}

// resetBeforeHeaders is the router's reply to the last attempt's reset;
// after a retry the body says "retried and the latest reset reason".
func resetBeforeHeaders(status int, reason, transport, flag string, retried bool) *localReply {
	body := "upstream connect error or disconnect/reset before headers. "
	if retried {
		body += "retried and the latest "
	}
	body += "reset reason: " + reason
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
