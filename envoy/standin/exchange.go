package standin

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// exchange is one HTTP request going through the filter chain. Its fields
// belong to the request's goroutine, except those that say otherwise.
type exchange struct {
	p      *Proxy
	w      http.ResponseWriter
	r      *http.Request
	ctx    context.Context // ends when the client goes away
	ps     *procStream     // nil when there is no ext_proc filter
	active atomic.Bool     // ext_proc is still consulted (any goroutine)
	mode   *filterv3.ProcessingMode

	headers    headerMap
	upgrade    string // the protocol an upgrade request asks for (upgradeOf)
	body       []byte
	hasBody    bool
	received   atomic.Bool // the whole request body arrived (any goroutine)
	replaced   bool        // CONTINUE_AND_REPLACE set the request body
	clearRoute bool
	route      *routev3.Route
	// abandoned counts messages whose replies nobody waits for any more:
	// a timer ended the wait, and the next replies answer them.
	abandoned int

	respStarted bool // response headers entered the encoder filters
	headersSent bool // ... and went downstream
	declared    int64
	written     int64
	overflow    bool

	cbody       *clientBody
	intr        *interrupts
	deadlineSet atomic.Bool // the stand-in cut the read of the client's body
	timers      *timers
	upCancel    context.CancelFunc
	flags       []string
	mdMu        sync.Mutex // guards entry.Metadata
	entry       Entry
	cleanups    []func()
}

// onFinish registers cleanup for when the request ends.
func (x *exchange) onFinish(f func()) { x.cleanups = append(x.cleanups, f) }

func (p *Proxy) newExchange(w http.ResponseWriter, r *http.Request) *exchange {
	x := &exchange{p: p, w: w, r: r, intr: newInterrupts(), declared: -1,
		entry: Entry{Method: r.Method, Path: r.URL.RequestURI(), StartTime: time.Now()}}
	x.timers = &timers{x: x}
	// The read of the client's body is ended with a read deadline, which
	// makes net/http cancel the request's context: only a client that
	// really went away ends this one.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stop := context.AfterFunc(r.Context(), func() {
		if !x.deadlineSet.Load() {
			cancel()
		}
	})
	x.ctx = ctx
	x.onFinish(func() { stop(); cancel() })
	if fc := p.plan.extproc; fc != nil {
		x.ps = &procStream{conn: p.conn, cluster: p.plan.clusters[fc.cluster], fc: fc, mode: fc.mode, unsolicited: x.unsolicited,
			metadata: func() *corev3.Metadata { return x.metadataContext(fc.forward) }}
		x.active.Store(true)
		x.mode = proto.Clone(fc.mode).(*filterv3.ProcessingMode)
	}
	return x
}

func (x *exchange) finish() {
	x.intr.end()
	x.timers.stopAll()
	for _, f := range x.cleanups {
		f()
	}
	if x.ps != nil {
		x.ps.close()
	}
	x.mdMu.Lock()
	e := x.entry
	x.mdMu.Unlock()
	e.Duration = time.Since(e.StartTime)
	e.BytesReceived, e.BytesSent = x.bytesReceived(), x.written
	al := x.p.plan.accessLog
	if al != nil {
		e.Line = string(al.logLine(x, e))
	}
	switch {
	case x.p.accessLog != nil:
		x.p.accessLog(e)
	case al != nil:
		al.write(e.Line)
	}
}

// bytesReceived counts the client's body bytes read.
func (x *exchange) bytesReceived() int64 {
	cb := x.cbody
	if cb == nil {
		return 0
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return int64(len(cb.data))
}

// requestHeaders builds the headers as Envoy's connection manager hands
// them to filters (conn_manager_utility.cc, mutateRequestHeaders), and
// notes the client address it trusts. In Envoy's order: the early header
// mutations first; then x-forwarded-for and the trusted client address;
// then whether the request is internal (its trusted address in
// internal_address_config's cidr_ranges: without one, no client is, as in
// Envoy 1.34 and later) and whether it is an edge request (external, with
// use_remote_address). An internal request gets x-envoy-internal: true
// and keeps its x-envoy-* headers; every external one loses the router's
// control headers (cleanInternalHeaders), an edge request a few more and
// its x-request-id.
func (x *exchange) requestHeaders() headerMap {
	r, pl := x.r, x.p.plan
	in := r.Header.Clone()
	for _, name := range pl.earlyRemove {
		in.Del(name)
	}
	// x-forwarded-for and the trusted client address.
	xff := strings.Join(in.Values("X-Forwarded-For"), ",")
	peer, _, _ := net.SplitHostPort(r.RemoteAddr)
	var trusted string
	var allowTrusted bool // allow_trusted_address_checks
	if pl.useRemoteAddress {
		allowTrusted = len(in.Values("X-Forwarded-For")) == 0
		if pl.xffTrustedHops > 0 {
			trusted = fromXFF(xff, pl.xffTrustedHops-1)
		}
		if trusted == "" {
			trusted = peer
		}
		appended := peer
		if ip := net.ParseIP(peer); ip != nil && ip.IsLoopback() {
			if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
				appended, _, _ = net.SplitHostPort(la.String())
			}
		}
		if xff == "" {
			xff = appended
		} else {
			xff += "," + appended
		}
	} else {
		trusted = fromXFF(xff, pl.xffTrustedHops)
		allowTrusted = trusted != "" && pl.xffTrustedHops == 0 && !strings.Contains(xff, ",")
	}
	internal := allowTrusted && pl.isInternal(trusted)
	edge := !internal && pl.useRemoteAddress
	client := trusted
	if client == "" {
		client = peer
	}
	// x-forwarded-proto is the client's unless an edge request's prior hop
	// is not trusted; set when missing.
	proto := in.Get("X-Forwarded-Proto")
	if proto == "" || pl.useRemoteAddress && pl.xffTrustedHops == 0 {
		proto = "http"
	}
	h := headerMap{{":authority", r.Host}, {":path", r.URL.RequestURI()}, {":method", r.Method}, {":scheme", "http"},
		{"x-forwarded-proto", proto}}
	if id := in.Get("X-Request-Id"); id != "" && !edge {
		h = append(h, header{"x-request-id", id})
	} else {
		h = append(h, header{"x-request-id", x.p.ids.next()})
	}
	for name, values := range in {
		key := strings.ToLower(name)
		// An upgrade keeps its connection and upgrade headers
		// (conn_manager_utility.cc, mutateRequestHeaders).
		if hopByHop[key] && !(x.upgrade != "" && (key == "connection" || key == "upgrade")) || key == "x-request-id" || key == "host" || key == "x-forwarded-for" || key == "x-forwarded-proto" ||
			key == "x-envoy-internal" || !internal && externalStripped[key] || edge && edgeStripped[key] {
			continue
		}
		for _, v := range values {
			h = append(h, header{key, v})
		}
	}
	if xff != "" {
		h = append(h, header{"x-forwarded-for", xff})
	}
	if internal {
		h = append(h, header{"x-envoy-internal", "true"})
	}
	if edge {
		h = append(h, header{"x-envoy-external-address", client})
	}
	x.entry.ClientAddress = client
	if r.ContentLength > 0 { // net/http keeps it out of r.Header
		h = h.set("content-length", strconv.FormatInt(r.ContentLength, 10))
	}
	return h
}

// externalStripped are the headers the connection manager removes from
// every request it does not count as internal, edgeStripped those it also
// removes from edge requests (conn_manager_utility.cc,
// cleanInternalHeaders, Envoy 1.37).
var (
	externalStripped = setOf("x-envoy-retriable-status-codes", "x-envoy-retriable-header-names", "x-envoy-retry-on",
		"x-envoy-retry-grpc-on", "x-envoy-max-retries", "x-envoy-upstream-alt-stat-name", "x-envoy-upstream-rq-timeout-ms",
		"x-envoy-upstream-rq-per-try-timeout-ms", "x-envoy-upstream-rq-timeout-alt-response", "x-envoy-expected-rq-timeout-ms",
		"x-envoy-force-trace", "x-envoy-ip-tags", "x-envoy-original-url", "x-envoy-hedge-on-per-try-timeout")
	edgeStripped = setOf("x-envoy-decorator-operation", "x-envoy-downstream-service-cluster",
		"x-envoy-downstream-service-node", "x-envoy-original-path", "x-envoy-original-host")
)

func setOf(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// fromXFF is the IP address hops entries left of the last one in an
// x-forwarded-for value, or "" (utility.cc, getLastAddressFromXFF).
func fromXFF(xff string, hops uint32) string {
	if xff == "" {
		return ""
	}
	entries := strings.Split(xff, ",")
	if uint64(hops) >= uint64(len(entries)) {
		return ""
	}
	e := strings.TrimSpace(entries[len(entries)-1-int(hops)])
	if net.ParseIP(e) == nil {
		return ""
	}
	return e
}

func (x *exchange) run() {
	x.timers.start(x.p.plan.idleTimeout, x.p.plan.requestTimeout)
	x.upgrade = upgradeOf(x.r)
	x.headers = x.requestHeaders()
	x.route = x.match() // the connection manager routes on the original headers
	// An HTTP/1.1 upgrade of a type the connection manager does not allow
	// fails before any filter when a route matched; the connection closes
	// (conn_manager_impl.cc, decodeHeaders: upgrade_rejected).
	if x.upgrade != "" && x.route != nil && !slices.Contains(x.p.plan.upgrades, x.upgrade) {
		x.w.Header().Set("Connection", "close")
		x.stop(&localReply{status: http.StatusForbidden, details: "upgrade_failed", skipFilters: true})
		return
	}
	x.stop(x.process())
}

// upgradeOf is the protocol an HTTP/1.1 request asks to switch to, lower
// case, or "" (utility.cc, isUpgrade: a Connection header with the upgrade
// token and an Upgrade header).
func upgradeOf(r *http.Request) string {
	if r.ProtoMajor != 1 || r.Header.Get("Upgrade") == "" {
		return ""
	}
	for _, v := range r.Header.Values("Connection") {
		for _, token := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(token), "upgrade") {
				return strings.ToLower(r.Header.Get("Upgrade"))
			}
		}
	}
	return ""
}

func (x *exchange) process() error {
	x.hasBody = x.r.Body != nil && x.r.Body != http.NoBody && x.r.ContentLength != 0
	if x.hasBody {
		x.startClientBody()
	} else {
		x.received.Store(true)
	}
	if err := x.processRequestHeaders(!x.hasBody); err != nil {
		return err
	}
	if x.hasBody {
		if err := x.readRequestBody(); err != nil {
			return err
		}
	}
	if err := x.intr.take(); err != nil {
		return err
	}
	if x.clearRoute {
		x.route = x.match()
	}
	return x.forward()
}

func (x *exchange) sending(mode filterv3.ProcessingMode_HeaderSendMode) bool {
	return x.active.Load() && mode != filterv3.ProcessingMode_SKIP
}

// stripsContentLength is Envoy's shouldRemoveContentLength
// (processor_state.h): STREAMED, BUFFERED_PARTIAL, FULL_DUPLEX_STREAMED,
// and BUFFERED with headers SKIP.
func stripsContentLength(body filterv3.ProcessingMode_BodySendMode, headers filterv3.ProcessingMode_HeaderSendMode) bool {
	switch body {
	case filterv3.ProcessingMode_STREAMED, filterv3.ProcessingMode_BUFFERED_PARTIAL, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		return true
	case filterv3.ProcessingMode_BUFFERED:
		return headers == filterv3.ProcessingMode_SKIP
	}
	return false
}

// responseProcessing reports whether ext_proc will still see the response.
func (x *exchange) responseProcessing() bool {
	return x.mode.GetResponseHeaderMode() != filterv3.ProcessingMode_SKIP ||
		x.mode.GetResponseBodyMode() != filterv3.ProcessingMode_NONE
}

// closeProc ends ext_proc for this request: Envoy closes the stream once
// it will send nothing more (1.37's stream-close optimisation), and after
// errors and immediate responses.
func (x *exchange) closeProc() {
	if x.ps != nil {
		x.active.Store(false)
		x.ps.close()
	}
}

func (x *exchange) processRequestHeaders(eos bool) error {
	// Envoy's decodeHeaders removes content-length right after sending
	// the headers, with the configured modes (before any override).
	strip := x.active.Load() && stripsContentLength(x.mode.GetRequestBodyMode(), x.mode.GetRequestHeaderMode())
	if !x.sending(x.mode.GetRequestHeaderMode()) {
		if strip {
			x.headers = x.headers.del("content-length")
		}
		return nil
	}
	resp, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: x.headers.proto(), EndOfStream: eos}}})
	if strip {
		x.headers = x.headers.del("content-length")
	}
	if err != nil || resp == nil {
		return err
	}
	hr, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_RequestHeaders)
	if !ok {
		_, err := x.failed(errSpurious)
		return err
	}
	if err := x.override(resp, true); err != nil {
		return err
	}
	common := hr.RequestHeaders.GetResponse()
	replace := common.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE
	m := mutation{replace: replace, stripContentLength: stripsContentLength(x.mode.GetRequestBodyMode(), x.mode.GetRequestHeaderMode())}
	if x.headers, err = m.apply(x.headers, common.GetHeaderMutation()); err != nil {
		return err
	}
	x.noteRouteCache(common)
	if replace && common.GetBodyMutation() != nil {
		x.body, x.replaced = mutatedBody(nil, common.GetBodyMutation()), true
		x.headers = x.headers.del("content-length")
		x.mode.RequestBodyMode = filterv3.ProcessingMode_NONE
	}
	if (eos || x.mode.GetRequestBodyMode() == filterv3.ProcessingMode_NONE) && !x.responseProcessing() {
		x.closeProc()
	}
	return nil
}

// noteRouteCache: Envoy clears the route cache only with a non-nil
// header_mutation next to clear_route_cache.
func (x *exchange) noteRouteCache(c *extprocv3.CommonResponse) {
	if c.GetClearRouteCache() && c.GetHeaderMutation() != nil {
		x.clearRoute = true
	}
}

// override applies mode_override from a header reply (ext_proc.cc,
// onReceiveMessage): header and trailer DEFAULT keep the configured mode,
// body modes are literal. Trailer processing, which the stand-in does not
// implement, is refused for a direction still to come.
func (x *exchange) override(resp *extprocv3.ProcessingResponse, request bool) error {
	o := resp.GetModeOverride()
	if o == nil || !x.p.plan.extproc.allowModeOverride {
		return nil
	}
	if request && o.GetRequestTrailerMode() == filterv3.ProcessingMode_SEND {
		return x.unimplemented("mode_override_request_trailer_mode_SEND")
	}
	if o.GetResponseTrailerMode() == filterv3.ProcessingMode_SEND {
		return x.unimplemented("mode_override_response_trailer_mode_SEND")
	}
	if o.GetResponseHeaderMode() != filterv3.ProcessingMode_DEFAULT {
		x.mode.ResponseHeaderMode = o.GetResponseHeaderMode()
	}
	x.mode.RequestBodyMode = o.GetRequestBodyMode() // body modes are literal: unset means NONE
	x.mode.ResponseBodyMode = o.GetResponseBodyMode()
	return nil
}

// clientBody reads the client's body in the background from the start, as
// Envoy's codec does while the filters work: "received" (the connection
// manager's remoteDecodeComplete) does not wait for ext_proc.
type clientBody struct {
	mu      sync.Mutex
	data    []byte
	err     error // io.EOF once complete
	changed chan struct{}
	exited  chan struct{}
}

func (x *exchange) startClientBody() {
	cb := &clientBody{changed: make(chan struct{}), exited: make(chan struct{})}
	x.cbody = cb
	rc := http.NewResponseController(x.w)
	rc.EnableFullDuplex() //nolint:errcheck // HTTP/1 supports it; elsewhere replies wait for the body
	go func() {
		defer close(cb.exited)
		buf := make([]byte, 32<<10)
		for {
			n, err := x.r.Body.Read(buf)
			if n > 0 {
				x.timers.touch()
			}
			if errors.Is(err, io.EOF) {
				x.received.Store(true)
			} else if err != nil && x.malformed(err) {
				// before the error is seen, so that waitBody takes this
				// cause rather than a client gone
				x.intr.fire(codecErrorReply())
			}
			cb.mu.Lock()
			cb.data = append(cb.data, buf[:n]...)
			cb.err = err
			close(cb.changed)
			cb.changed = make(chan struct{})
			cb.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	// The request ends: stop reading with a read deadline, which makes
	// net/http cancel the request's context (ignored, see newExchange).
	x.onFinish(func() {
		select {
		case <-cb.exited:
		default:
			if x.bodyComplete() { // the reader is about to see EOF
				<-cb.exited
				return
			}
			x.deadlineSet.Store(true)
			rc.SetReadDeadline(time.Now()) //nolint:errcheck // then the client ends the read
			<-cb.exited
		}
	})
}

// malformed reports a read error of the client's body that is its
// framing, not its connection: a chunked body net/http cannot parse (a
// chunk size that is not hexadecimal, or too large, or a line in place of
// one), which Envoy's HTTP/1 codec would not parse either. A body cut by
// the client closing its connection (io.ErrUnexpectedEOF), a network
// error or the stand-in's own read deadline is not.
func (x *exchange) malformed(err error) bool {
	var ne net.Error
	return len(x.r.TransferEncoding) > 0 && !x.deadlineSet.Load() &&
		!errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &ne)
}

// bodyComplete reports that the client's whole body arrived: its reader
// saw EOF, or as many bytes as its content-length (EOF is the next read).
func (x *exchange) bodyComplete() bool {
	if !x.hasBody || x.received.Load() {
		return true
	}
	cb := x.cbody
	if cb == nil || x.r.ContentLength < 0 {
		return false
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return int64(len(cb.data)) >= x.r.ContentLength
}

// waitBody returns the client's body once it is complete, or once more
// than limit bytes arrived (limit < 0: no limit). A timer or an ext_proc
// event interrupts the wait.
func (x *exchange) waitBody(limit int64) ([]byte, error) {
	cb := x.cbody
	for {
		cb.mu.Lock()
		data, err, changed := cb.data, cb.err, cb.changed
		cb.mu.Unlock()
		switch {
		case limit >= 0 && int64(len(data)) > limit, errors.Is(err, io.EOF):
			return data, nil
		case err != nil:
			if c := x.intr.take(); c != nil {
				return nil, c
			}
			return nil, errAbort
		}
		select {
		case <-changed:
		case <-x.intr.wait():
			return nil, x.intr.take()
		case <-x.ctx.Done():
			return nil, errAbort
		}
	}
}

func (x *exchange) readRequestBody() error {
	if x.replaced { // CONTINUE_AND_REPLACE: the client's body is drained, the new one goes on
		return nil
	}
	mode := x.mode.GetRequestBodyMode()
	active := x.active.Load()
	if active && mode != filterv3.ProcessingMode_NONE && mode != filterv3.ProcessingMode_BUFFERED {
		return x.unimplemented("request_body_mode_" + mode.String())
	}
	limit := x.p.plan.bufferLimit
	buffered := active && mode == filterv3.ProcessingMode_BUFFERED
	if !buffered { // NONE: the body streams through unprocessed
		var err error
		x.body, err = x.waitBody(-1)
		return err
	}
	body, err := x.waitBody(limit)
	if err != nil {
		return err
	}
	if int64(len(body)) > limit {
		return &localReply{status: http.StatusRequestEntityTooLarge, body: "Payload Too Large", details: "request_payload_too_large"}
	}
	x.body = body
	return x.processRequestBody()
}

func (x *exchange) processRequestBody() error {
	resp, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: x.body, EndOfStream: true}}})
	if err != nil || resp == nil {
		return err
	}
	br, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_RequestBody)
	if !ok || br.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse() != nil {
		_, err := x.failed(errSpurious)
		return err
	}
	common := br.RequestBody.GetResponse()
	if x.mode.GetRequestHeaderMode() != filterv3.ProcessingMode_SKIP { // headers are still held
		if x.headers, err = (mutation{}).apply(x.headers, common.GetHeaderMutation()); err != nil {
			return err
		}
		x.noteRouteCache(common)
	}
	if common.GetBodyMutation() != nil {
		x.body = mutatedBody(x.body, common.GetBodyMutation())
		return checkContentLength(x.headers, x.body)
	}
	return nil
}

// mutatedBody applies a body or clear_body mutation.
func mutatedBody(old []byte, m *extprocv3.BodyMutation) []byte {
	switch b := m.GetMutation().(type) {
	case *extprocv3.BodyMutation_Body:
		return b.Body
	case *extprocv3.BodyMutation_ClearBody:
		if b.ClearBody {
			return nil
		}
	}
	return old
}

// checkContentLength is Envoy's rule for BUFFERED with headers SEND: a
// content-length that does not match the mutated body fails the request.
func checkContentLength(h headerMap, body []byte) error {
	if cl, ok := h.get("content-length"); ok && cl != strconv.Itoa(len(body)) {
		return &mutationError{"mismatch between content length and the length of the mutated body"}
	}
	return nil
}

// match picks the route for the current headers.
func (x *exchange) match() *routev3.Route {
	authority, _ := x.headers.get(":authority")
	path, _ := x.headers.get(":path")
	for _, vh := range x.p.plan.routes.GetVirtualHosts() {
		if !domainMatch(vh.GetDomains(), authority) {
			continue
		}
		for _, r := range vh.GetRoutes() {
			if routeMatch(r.GetMatch(), path, x.headers) {
				return r
			}
		}
		return nil
	}
	return nil
}

func domainMatch(domains []string, authority string) bool {
	host := authority
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	for _, d := range domains {
		if d == "*" || d == authority || d == host {
			return true
		}
	}
	return false
}

func routeMatch(m *routev3.RouteMatch, path string, h headerMap) bool {
	if p := m.GetPath(); p != "" {
		if q := strings.IndexByte(path, '?'); q >= 0 {
			path = path[:q]
		}
		if path != p {
			return false
		}
	} else if !strings.HasPrefix(path, m.GetPrefix()) {
		return false
	}
	for _, hm := range m.GetHeaders() {
		v, ok := h.get(strings.ToLower(hm.GetName()))
		if !ok || !hm.GetPresentMatch() && v != hm.GetStringMatch().GetExact() {
			return false
		}
	}
	return true
}

// call sends a message and awaits its reply. An immediate response comes
// back as a *localReply error; failures follow failure_mode_allow: a nil
// reply with a nil error means "continue without ext_proc".
func (x *exchange) call(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if err := x.ps.send(x.ctx, req); err != nil {
		return x.failed(err)
	}
	return x.receive()
}

// receive awaits the reply to a message already sent; see call.
func (x *exchange) receive() (*extprocv3.ProcessingResponse, error) {
	for {
		resp, err := x.ps.await(x.ctx, x.intr.wait())
		if errors.Is(err, errInterrupted) {
			x.abandoned++
			return nil, x.intr.take()
		}
		if err != nil {
			return x.failed(err)
		}
		x.mergeMetadata(resp)
		if ir := resp.GetImmediateResponse(); ir != nil {
			x.closeProc()
			return nil, immediate(ir)
		}
		if x.abandoned > 0 { // the reply to a message nobody waits for
			x.abandoned--
			continue
		}
		switch resp.GetResponse().(type) {
		case nil:
			return x.failed(errUnhandled)
		case *extprocv3.ProcessingResponse_StreamedImmediateResponse:
			return nil, x.unimplemented("streamed_immediate_response")
		case *extprocv3.ProcessingResponse_RequestTrailers, *extprocv3.ProcessingResponse_ResponseTrailers:
			return x.failed(errSpurious) // no trailers are ever sent
		}
		return resp, nil
	}
}

// failed applies Envoy's error handling: a clean close continues without
// ext_proc; timeouts, gRPC errors and spurious replies fail closed unless
// failure_mode_allow.
func (x *exchange) failed(err error) (*extprocv3.ProcessingResponse, error) {
	x.closeProc()
	var ge *grpcError
	switch {
	case errors.Is(err, errClosed):
		return nil, nil
	case errors.Is(err, context.Canceled), x.ctx.Err() != nil:
		// the client went away, which cancelled the stream (a gRPC
		// Canceled): Envoy resets the request and answers nothing
		return nil, errAbort
	case x.p.plan.extproc.failureModeAllow:
		return nil, nil
	case errors.Is(err, errTimeout):
		return nil, x.extProcError(http.StatusGatewayTimeout, errTimeout.Error())
	case errors.As(err, &ge):
		return nil, x.extProcError(x.p.plan.extproc.statusOnError, ge.Error())
	}
	return nil, x.extProcError(x.p.plan.extproc.statusOnError, err.Error())
}

// unsolicited handles what the processor sends while nothing is pending
// (on the stream's goroutine): an immediate response is honoured at any
// time; a clean close ends processing; anything else is spurious, and like
// a gRPC error fails the request unless failure_mode_allow.
func (x *exchange) unsolicited(resp *extprocv3.ProcessingResponse, err error) {
	if !x.active.Load() {
		return // processing is complete: Envoy ignores the stream
	}
	fc := x.p.plan.extproc
	var cause *localReply
	switch {
	case errors.Is(err, errClosed):
	case err != nil:
		if !fc.failureModeAllow {
			cause = &localReply{status: fc.statusOnError, details: detailsOf(err.Error()), skipFilters: true}
		}
	case resp.GetImmediateResponse() != nil:
		x.mergeMetadata(resp)
		cause = immediate(resp.GetImmediateResponse())
	case !fc.failureModeAllow:
		cause = &localReply{status: fc.statusOnError, details: detailsOf(errSpurious.Error()), skipFilters: true}
	}
	if cause != nil {
		x.intr.fire(cause)
	}
	x.closeProc()
}

func (x *exchange) mergeMetadata(resp *extprocv3.ProcessingResponse) {
	x.mergeMetadataFrom(resp, x.p.plan.extproc.namespaces)
}

// metadataContext is a message's metadata_context: the forwarding
// namespaces of the request's dynamic metadata as it is now (ext_proc.cc,
// setDynamicMetadata on every message; shared with the upstream filters).
func (x *exchange) metadataContext(forward []string) *corev3.Metadata {
	md := &corev3.Metadata{}
	x.mdMu.Lock()
	defer x.mdMu.Unlock()
	for _, ns := range forward {
		if m, ok := x.entry.Metadata[ns]; ok {
			if s, err := structpb.NewStruct(m); err == nil {
				if md.FilterMetadata == nil {
					md.FilterMetadata = map[string]*structpb.Struct{}
				}
				md.FilterMetadata[ns] = s
			}
		}
	}
	return md
}

// mergeMetadataFrom writes a reply's dynamic_metadata into the request's,
// shared by the router-level and the upstream filters: the namespaces the
// filter receives, later writes winning.
func (x *exchange) mergeMetadataFrom(resp *extprocv3.ProcessingResponse, namespaces map[string]bool) {
	x.mdMu.Lock()
	defer x.mdMu.Unlock()
	for ns, v := range resp.GetDynamicMetadata().GetFields() {
		if !namespaces[ns] || v.GetStructValue() == nil {
			continue
		}
		if x.entry.Metadata == nil {
			x.entry.Metadata = map[string]map[string]any{}
		}
		if x.entry.Metadata[ns] == nil {
			x.entry.Metadata[ns] = map[string]any{}
		}
		for k, val := range v.GetStructValue().AsMap() {
			x.entry.Metadata[ns][k] = val
		}
	}
}
