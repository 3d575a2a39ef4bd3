package standin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
)

// exchange is one HTTP request going through the filter chain.
type exchange struct {
	p      *Proxy
	w      http.ResponseWriter
	r      *http.Request
	ctx    context.Context
	ps     *procStream // nil when there is no ext_proc filter
	active atomic.Bool // ext_proc is still consulted
	mode   *filterv3.ProcessingMode

	headers    headerMap
	body       []byte
	replaced   bool // CONTINUE_AND_REPLACE set the request body
	clearRoute bool
	route      *routev3.Route

	headersSent bool
	entry       Entry
	cleanups    []func()
	idle        *idleTimer
}

// onFinish registers cleanup for when the request ends.
func (x *exchange) onFinish(f func()) { x.cleanups = append(x.cleanups, f) }

func (p *Proxy) newExchange(w http.ResponseWriter, r *http.Request) *exchange {
	x := &exchange{p: p, w: w, r: r, ctx: r.Context(), entry: Entry{Method: r.Method, Path: r.URL.RequestURI()}}
	if fc := p.plan.extproc; fc != nil {
		x.ps = &procStream{conn: p.conn, fc: fc, mode: fc.mode}
		x.active.Store(true)
		x.mode = proto.Clone(fc.mode).(*filterv3.ProcessingMode)
	}
	return x
}

func (x *exchange) finish() {
	for _, f := range x.cleanups {
		f()
	}
	if x.ps != nil {
		x.ps.close()
	}
	if x.p.accessLog != nil {
		x.p.accessLog(x.entry)
	}
}

// requestHeaders builds the headers as Envoy's connection manager hands
// them to filters.
func (x *exchange) requestHeaders() headerMap {
	r := x.r
	h := headerMap{{":authority", r.Host}, {":path", r.URL.RequestURI()}, {":method", r.Method}, {":scheme", "http"},
		{"x-forwarded-proto", "http"}}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		h = append(h, header{"x-request-id", id})
	} else {
		h = append(h, header{"x-request-id", x.p.ids.next()})
	}
	for name, values := range r.Header {
		key := strings.ToLower(name)
		if hopByHop[key] || key == "x-request-id" || key == "host" {
			continue
		}
		for _, v := range values {
			h = append(h, header{key, v})
		}
	}
	return h
}

func (x *exchange) run() {
	x.headers = x.requestHeaders()
	x.route = x.match() // the connection manager routes on the original headers
	hasBody := x.r.Body != nil && x.r.Body != http.NoBody && x.r.ContentLength != 0
	if err := x.processRequestHeaders(!hasBody); err != nil {
		x.stop(err)
		return
	}
	if hasBody && !x.replaced {
		if err := x.readRequestBody(); err != nil {
			x.stop(err)
			return
		}
	}
	if x.clearRoute {
		x.route = x.match()
	}
	x.forward()
}

func (x *exchange) sending(mode filterv3.ProcessingMode_HeaderSendMode) bool {
	return x.active.Load() && mode != filterv3.ProcessingMode_SKIP
}

func (x *exchange) processRequestHeaders(eos bool) error {
	if !x.sending(x.mode.GetRequestHeaderMode()) {
		return nil
	}
	resp, err := x.call(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: x.headers.proto(), EndOfStream: eos}}})
	if err != nil || resp == nil {
		return err
	}
	hr, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_RequestHeaders)
	if !ok {
		_, err := x.failed(errSpurious)
		return err
	}
	x.override(resp)
	common := hr.RequestHeaders.GetResponse()
	replace := common.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE
	if x.headers, err = (mutation{replace: replace}).apply(x.headers, common.GetHeaderMutation()); err != nil {
		return err
	}
	x.noteRouteCache(common)
	if replace && common.GetBodyMutation() != nil {
		x.body, x.replaced = mutatedBody(nil, common.GetBodyMutation()), true
		x.headers = x.headers.del("content-length")
		x.mode.RequestBodyMode = filterv3.ProcessingMode_NONE
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

// override applies mode_override from a header reply (§2.6).
func (x *exchange) override(resp *extprocv3.ProcessingResponse) {
	o := resp.GetModeOverride()
	if o == nil || !x.p.plan.extproc.allowModeOverride {
		return
	}
	if o.GetResponseHeaderMode() != filterv3.ProcessingMode_DEFAULT {
		x.mode.ResponseHeaderMode = o.GetResponseHeaderMode()
	}
	x.mode.RequestBodyMode = o.GetRequestBodyMode() // body modes are literal: unset means NONE
	x.mode.ResponseBodyMode = o.GetResponseBodyMode()
}

func (x *exchange) readRequestBody() error {
	limit := x.p.plan.bufferLimit
	body, err := io.ReadAll(io.LimitReader(x.r.Body, limit+1))
	if err != nil {
		return errAbort
	}
	buffered := x.active.Load() && x.mode.GetRequestBodyMode() == filterv3.ProcessingMode_BUFFERED
	if buffered && int64(len(body)) > limit {
		return &localReply{status: http.StatusRequestEntityTooLarge, body: "Payload Too Large", details: "request_payload_too_large"}
	}
	if !buffered { // NONE: the body streams through unprocessed
		rest, err := io.ReadAll(x.r.Body)
		if err != nil {
			return errAbort
		}
		x.body = append(body, rest...)
		return nil
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
	resp, err := x.ps.await(x.ctx)
	if err != nil {
		return x.failed(err)
	}
	x.mergeMetadata(resp)
	if ir := resp.GetImmediateResponse(); ir != nil {
		x.active.Store(false)
		x.ps.close()
		return nil, immediate(ir)
	}
	if spurious(resp) {
		return x.failed(errSpurious)
	}
	return resp, nil
}

// spurious catches what no state accepts: an empty reply and the cases the
// stand-in does not implement (streamed immediate responses, trailers).
func spurious(resp *extprocv3.ProcessingResponse) bool {
	switch resp.GetResponse().(type) {
	case nil, *extprocv3.ProcessingResponse_StreamedImmediateResponse,
		*extprocv3.ProcessingResponse_RequestTrailers, *extprocv3.ProcessingResponse_ResponseTrailers:
		return true
	}
	return false
}

// failed applies §4: a clean close continues without ext_proc; timeouts,
// gRPC errors and spurious replies fail closed unless failure_mode_allow.
func (x *exchange) failed(err error) (*extprocv3.ProcessingResponse, error) {
	x.active.Store(false)
	x.ps.close()
	var ge *grpcError
	switch {
	case errors.Is(err, errClosed):
		return nil, nil
	case errors.Is(err, context.Canceled):
		return nil, errAbort
	case x.p.plan.extproc.failureModeAllow:
		return nil, nil
	case errors.Is(err, errTimeout):
		return nil, &localReply{status: http.StatusGatewayTimeout, details: errTimeout.Error(), skipFilters: true}
	case errors.As(err, &ge):
		return nil, &localReply{status: x.p.plan.extproc.statusOnError, details: ge.Error(), skipFilters: true}
	}
	return nil, &localReply{status: x.p.plan.extproc.statusOnError, details: err.Error(), skipFilters: true}
}

func (x *exchange) mergeMetadata(resp *extprocv3.ProcessingResponse) {
	for ns, v := range resp.GetDynamicMetadata().GetFields() {
		if !x.p.plan.extproc.namespaces[ns] || v.GetStructValue() == nil {
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
