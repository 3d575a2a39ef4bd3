package standin

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// localReply is a response Envoy makes itself.
type localReply struct {
	status  int
	headers headerMap
	body    string
	details string
	// skipFilters sends it straight to the client: ext_proc's own errors
	// and immediate responses do not go through ext_proc again.
	skipFilters bool
}

func (l *localReply) Error() string { return "local reply " + strconv.Itoa(l.status) + " " + l.details }

// immediate turns an ImmediateResponse into a local reply (§2.4).
func immediate(ir *extprocv3.ImmediateResponse) *localReply {
	status := int(ir.GetStatus().GetCode())
	if status < 200 {
		status = 200
	}
	h, err := (mutation{}).apply(nil, ir.GetHeaders())
	if err != nil {
		h = nil // errors in immediate-response headers are only logged by Envoy
	}
	details := strings.Join(strings.Fields(ir.GetDetails()), "_")
	return &localReply{status: status, headers: h, body: string(ir.GetBody()), details: details, skipFilters: true}
}

// stop ends the request with err.
func (x *exchange) stop(err error) {
	var lr *localReply
	var me *mutationError
	switch {
	case errors.As(err, &me):
		lr = &localReply{status: x.p.plan.extproc.statusOnError, details: me.details, skipFilters: true}
	case errors.As(err, &lr):
	case errors.Is(err, errAbort): // the client went away or the stream must be reset
		x.abort()
		return
	default: // a stand-in bug: never answer 200 by accident
		lr = &localReply{status: http.StatusInternalServerError, details: "standin_" + err.Error(), skipFilters: true}
	}
	if x.headersSent {
		x.abort() // a local reply after the headers went out resets the stream
		return
	}
	if lr.skipFilters || !x.active.Load() {
		x.write(lr.status, lr.finalHeaders(), []byte(lr.body), lr.details)
		return
	}
	x.entry.Details = lr.details
	x.respond(lr.status, lr.finalHeaders(), newBytesBody([]byte(lr.body)))
}

// finalHeaders adds what Envoy's local replies carry.
func (l *localReply) finalHeaders() headerMap {
	h := l.headers.clone()
	if l.body != "" {
		if _, ok := h.get("content-type"); !ok {
			h = append(h, header{"content-type", "text/plain"})
		}
	}
	return h.set("content-length", strconv.Itoa(len(l.body)))
}

func (x *exchange) abort() {
	x.entry.Details = "downstream_reset"
	if x.headersSent {
		panic(http.ErrAbortHandler)
	}
}

// write sends a whole response to the client.
func (x *exchange) write(status int, h headerMap, body []byte, details string) {
	if details != "" {
		x.entry.Details = details
	}
	h = h.set("content-length", strconv.Itoa(len(body)))
	x.writeHeaders(status, h)
	x.w.Write(body) //nolint:errcheck // the client went away
}

func (x *exchange) writeHeaders(status int, h headerMap) {
	out := x.w.Header()
	for _, e := range h {
		if strings.HasPrefix(e.key, ":") || hopByHop[e.key] {
			continue
		}
		out.Add(e.key, e.value)
	}
	x.entry.Status = status
	x.headersSent = true
	x.w.WriteHeader(status)
}
