package standin

import (
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3svc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// header is one header value; a header map keeps Envoy's order with
// pseudo-headers first and one entry per value.
type header struct{ key, value string }

type headerMap []header

func (h headerMap) get(key string) (string, bool) {
	for _, e := range h {
		if e.key == key {
			return e.value, true
		}
	}
	return "", false
}

func (h headerMap) del(key string) headerMap {
	out := h[:0]
	for _, e := range h {
		if e.key != key {
			out = append(out, e)
		}
	}
	return out
}

func (h headerMap) set(key, value string) headerMap {
	for i, e := range h {
		if e.key == key {
			h[i].value = value
			return append(h[:i+1], h[i+1:].del(key)...)
		}
	}
	return append(h, header{key, value})
}

func (h headerMap) clone() headerMap { return append(headerMap(nil), h...) }

// proto renders the map as Envoy sends it: raw_value only.
func (h headerMap) proto() *corev3.HeaderMap {
	out := &corev3.HeaderMap{}
	for _, e := range h {
		out.Headers = append(out.Headers, &corev3.HeaderValue{Key: e.key, RawValue: []byte(e.value)})
	}
	return out
}

// hopByHop are stripped by the connection manager before filters see them.
var hopByHop = map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true, "te": true}

// Envoy's header limits (max_headers_count, max_request_headers_kb).
const (
	maxHeaders     = 100
	maxHeaderBytes = 60 << 10
)

// mutationError is a failed mutation: a local reply with status_on_error.
type mutationError struct{ details string }

func (e *mutationError) Error() string { return e.details }

// mutation applies a HeaderMutation with Envoy's default mutation rules
// (Envoy's mutation_utils.cc and the mutation_rules checker).
type mutation struct {
	// stripContentLength skips content-length sets, as Envoy does in modes
	// where it removes the header.
	stripContentLength bool
	// replace allows :method (CONTINUE_AND_REPLACE).
	replace bool
	// response is true for response headers, where :status may be set.
	response bool
}

func (m mutation) apply(h headerMap, mut *extprocv3svc.HeaderMutation) (headerMap, error) {
	if mut == nil {
		return h, nil
	}
	if len(mut.GetRemoveHeaders()) > maxHeaders || len(mut.GetSetHeaders()) > maxHeaders {
		return h, &mutationError{"header_mutation_operation_count_exceeds_limit"}
	}
	for _, name := range mut.GetRemoveHeaders() {
		name = strings.ToLower(name)
		if !validName(name) {
			return h, &mutationError{"header_mutation_remove_headers_failed"}
		}
		if name == "host" || strings.HasPrefix(name, ":") || !allowed(name) {
			continue // never removable, or disallowed: silently ignored
		}
		h = h.del(name)
	}
	for _, o := range mut.GetSetHeaders() {
		var err error
		if h, err = m.set(h, o); err != nil {
			return h, err
		}
	}
	return h, checkLimits(h)
}

func (m mutation) set(h headerMap, o *corev3.HeaderValueOption) (headerMap, error) {
	if o.GetHeader() == nil {
		return h, nil
	}
	key := strings.ToLower(o.GetHeader().GetKey())
	value := string(o.GetHeader().GetRawValue()) // Envoy ignores `value` since 1.32
	if !validName(key) || strings.ContainsAny(value, "\r\n\x00") {
		return h, &mutationError{"header_mutation_set_contains_invalid_character"}
	}
	if !m.settable(key, value) || key == "content-length" && m.stripContentLength {
		return h, nil
	}
	//lint:ignore SA1019 ext_proc header mutations use the deprecated append, as Envoy does
	if o.GetAppend().GetValue() {
		if _, exists := h.get(key); exists {
			if strings.HasPrefix(key, ":") {
				return h, nil // appending to a pseudo-header is never allowed
			}
			return append(h, header{key, value}), nil
		}
	}
	return h.set(key, value), nil
}

func (m mutation) settable(key, value string) bool {
	switch key {
	case ":authority", "host", ":scheme":
		return false
	case ":method":
		return m.replace
	case ":status":
		n, err := strconv.Atoi(value)
		return m.response && err == nil && n >= 200
	}
	return allowed(key)
}

// allowed applies the default rule for Envoy's own headers.
func allowed(key string) bool { return !strings.HasPrefix(key, "x-envoy") }

func validName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		if c == ':' && i == 0 {
			continue
		}
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", c) {
			return false
		}
	}
	return true
}

func checkLimits(h headerMap) error {
	size := 0
	for _, e := range h {
		size += len(e.key) + len(e.value)
	}
	if len(h) > maxHeaders || size > maxHeaderBytes {
		return &mutationError{"header_mutation_result_exceeds_limit"}
	}
	return nil
}
