package extproc

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"modelgate/ratelimit"
)

// Envoy reads only raw_value (since 1.32 `value` is ignored, and setting both
// broke 1.31: envoyproxy/envoy#31555, PR #34034) and only the `append`
// BoolValue, where unset means overwrite. Every mutation we send goes through
// this file so those rules hold in one place.

// headers is a mutation under construction. Its headers are made in
// slabs and their values appended to one buffer, so that a mutation of
// a dozen headers costs a few allocations, not three a header.
type headers struct {
	set    []*corev3.HeaderValueOption
	remove []string
	slab   []headerSlab
	values []byte
}

// headerSlab is one header's two messages, allocated together.
type headerSlab struct {
	opt corev3.HeaderValueOption
	val corev3.HeaderValue
}

// Set overwrites a header.
func (h *headers) Set(name, value string) {
	start := len(h.values)
	h.values = append(h.values, value...)
	h.add(name, start)
}

// SetInt overwrites a header with a decimal number.
func (h *headers) SetInt(name string, v int64) {
	start := len(h.values)
	h.values = strconv.AppendInt(h.values, v, 10)
	h.add(name, start)
}

// add sets name to the value appended to h.values from start. A value
// keeps the array it was appended to when the buffer grows.
func (h *headers) add(name string, start int) {
	if len(h.slab) == cap(h.slab) { // 2, 4, 8, …: most mutations are small
		h.slab = make([]headerSlab, 0, max(2, 2*cap(h.slab)))
	}
	h.slab = h.slab[:len(h.slab)+1]
	s := &h.slab[len(h.slab)-1]
	end := len(h.values)
	s.val.Key, s.val.RawValue = name, h.values[start:end:end]
	s.opt.Header = &s.val
	h.set = append(h.set, &s.opt)
}

// reserve makes room for n more headers in one slab, for a mutation
// known to be large: slabs grown from two would be allocated thrice.
func (h *headers) reserve(n int) {
	if cap(h.slab)-len(h.slab) < n {
		h.slab = make([]headerSlab, 0, n)
	}
	h.set = slices.Grow(h.set, n)
}

// Remove removes every value of a header.
func (h *headers) Remove(name string) { h.remove = append(h.remove, name) }

// mutation returns the proto, never nil: Envoy honours clear_route_cache
// only next to a non-nil header_mutation.
func (h *headers) mutation() *extprocv3.HeaderMutation {
	return &extprocv3.HeaderMutation{SetHeaders: h.set, RemoveHeaders: h.remove}
}

// requestIDHeader names the request the way Envoy does, in logs and
// usage records; the client gets it back on every answer.
const requestIDHeader = "x-request-id"

// withRequestID sets x-request-id on whatever of resp reaches the client
// as response headers: an immediate response (an answer of the gateway's
// own, or an error, also one replacing a provider's answer) or the reply
// to the response headers (a provider's answer, or one of Envoy's own).
// Envoy does not add it to responses by itself; a provider's own request
// id is replaced.
func withRequestID(resp *extprocv3.ProcessingResponse, id string) {
	if id == "" {
		return
	}
	var mut **extprocv3.HeaderMutation
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		mut = &r.ImmediateResponse.Headers
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		if r.ResponseHeaders.Response == nil {
			r.ResponseHeaders.Response = &extprocv3.CommonResponse{}
		}
		mut = &r.ResponseHeaders.Response.HeaderMutation
	default:
		return
	}
	if *mut == nil {
		*mut = &extprocv3.HeaderMutation{}
	}
	(*mut).SetHeaders = append((*mut).SetHeaders, &corev3.HeaderValueOption{
		Header: &corev3.HeaderValue{Key: requestIDHeader, RawValue: []byte(id)},
	})
}

// headerMap is a read view of the headers Envoy sent. Lookups scan them:
// a message has a few dozen, and a request reads a handful, so no map is
// built. Names are matched without regard to case; a repeated header
// gives its first value.
type headerMap struct{ hs []*corev3.HeaderValue }

func readHeaders(m *corev3.HeaderMap) headerMap { return headerMap{m.GetHeaders()} }

// get returns the value of name (lower-case), or "" if it is absent.
func (h headerMap) get(name string) string {
	v, _ := h.lookup(name)
	return v
}

// prefixed returns the names of the headers present that start with one
// of prefixes (lower case), in lower case, sorted, each once.
func (h headerMap) prefixed(prefixes []string) []string {
	var names []string
	for _, hv := range h.hs {
		k := hv.GetKey()
		for _, p := range prefixes {
			if len(k) > len(p) && strings.EqualFold(k[:len(p)], p) {
				names = append(names, strings.ToLower(k))
				break
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// lookup returns the value of name (lower-case) and whether it is present.
// The value shares the bytes of the header's raw_value: a decoded
// message's, which nothing writes to.
func (h headerMap) lookup(name string) (string, bool) {
	for _, hv := range h.hs {
		if k := hv.GetKey(); len(k) == len(name) && (k == name || strings.EqualFold(k, name)) {
			if raw := hv.GetRawValue(); len(raw) > 0 {
				return unsafe.String(unsafe.SliceData(raw), len(raw)), true
			}
			return hv.GetValue(), true
		}
	}
	return "", false
}

// immediate builds an immediate response with a JSON body.
func immediate(status int, body []byte) *extprocv3.ProcessingResponse {
	var h headers
	h.Set("content-type", "application/json")
	return localReply(status, &h, body, "modelgate_"+strconv.Itoa(status))
}

// localReply builds an immediate response: Envoy answers the client with
// it and ends the stream.
func localReply(status int, h *headers, body []byte, details string) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(status)},
			Headers: h.mutation(),
			Body:    body,
			Details: details,
		},
	}}
}

// streamedOverride switches the response body to STREAMED. Envoy takes body
// modes literally (unset means NONE), so both are filled.
func streamedOverride() *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{
		RequestBodyMode:  filterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode: filterv3.ProcessingMode_STREAMED,
	}
}

func bodyMutation(body []byte) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: body}}
}

// rateHeaders are OpenAI's x-ratelimit-* headers for a decision: the
// tightest requests rule and the tightest tokens rule.
func rateHeaders(d *ratelimit.Decision, h *headers) {
	if d == nil {
		return
	}
	for _, k := range [...]struct {
		kind                    ratelimit.Kind
		limit, remaining, reset string
	}{
		{ratelimit.Requests, "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"},
		{ratelimit.Tokens, "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"},
	} {
		st, ok := d.Tightest(k.kind)
		if !ok {
			continue
		}
		h.SetInt(k.limit, st.Rule.Limit.Max)
		h.SetInt(k.remaining, st.Remaining)
		h.Set(k.reset, resetString(st.Reset))
	}
}

// resetString formats a reset as OpenAI does: "6s", "1m30s", "250ms".
func resetString(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return d.Round(time.Second).String()
}

// bodyReply answers a body message. Without replace the chunk goes on
// unchanged; with it, body replaces the chunk even when empty.
func bodyReply(body []byte, replace bool, mut *headers) *extprocv3.ProcessingResponse {
	common := &extprocv3.CommonResponse{}
	if replace {
		common.BodyMutation = bodyMutation(body)
	}
	if mut != nil {
		common.HeaderMutation = mut.mutation()
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{Response: common},
	}}
}

// chunkReply is the reply to a streamed chunk, made once an exchange: a
// stream's chunks are most of its messages, and gRPC encodes a reply
// before Send returns, so each chunk's reply can be the last one's with
// the body changed.
type chunkReply struct {
	resp     extprocv3.ProcessingResponse
	body     extprocv3.ProcessingResponse_ResponseBody
	response extprocv3.BodyResponse
	common   extprocv3.CommonResponse
	mutation extprocv3.BodyMutation
	replace  extprocv3.BodyMutation_Body
}

func newChunkReply() *chunkReply {
	c := &chunkReply{}
	c.resp.Response = &c.body
	c.body.ResponseBody = &c.response
	c.response.Response = &c.common
	c.common.BodyMutation = &c.mutation
	c.mutation.Mutation = &c.replace
	return c
}

// with replaces the chunk with body (also when empty).
func (c *chunkReply) with(body []byte) *extprocv3.ProcessingResponse {
	c.replace.Body = body
	return &c.resp
}
