package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
)

// ids numbers what the model makes: messages, calls, responses.
var ids atomic.Int64

func newID(prefix string) string { return prefix + strconv.FormatInt(ids.Add(1), 36) }

// writeJSON answers v as a JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

// sse writes Server-Sent Events, flushing each.
type sse struct {
	w http.ResponseWriter
}

func startSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w}
}

// event writes one event: named when name is not empty, its data v as
// JSON (or as it is, when a string).
func (s sse) event(name string, v any) {
	var data []byte
	if str, ok := v.(string); ok {
		data = []byte(str)
	} else {
		data, _ = json.Marshal(v)
	}
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// pieces splits s in up to three parts, as a model streams it.
func pieces(s string) []string {
	r := []rune(s)
	if len(r) < 3 {
		return []string{s}
	}
	a, b := len(r)/3, 2*len(r)/3
	return []string{string(r[:a]), string(r[a:b]), string(r[b:])}
}
