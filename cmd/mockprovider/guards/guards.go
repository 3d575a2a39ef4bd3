// Package guards emulates the guard services a guardrail rule can call
// (extproc/guard/services), each at its documented path and in its wire
// format, as the mock provider emulates the providers. Every emulator
// flags the same things, so one test works with any of them: text
// matching Flagged (case-insensitive "forbidden-word" and "zebra-"
// followed by digits), with the places where the contract has them.
//
// Fault switches, for tests of what a failing service does: a request
// under /faults/F/ (after the emulators' prefix) gets fault F instead of
// an answer: slow (the answer after Slow), 429, 500, malformed (a body
// that is not JSON), null (a JSON null body), hang (no answer until the
// client gives up).
package guards

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Flagged is what every emulator flags.
var Flagged = regexp.MustCompile(`(?i)forbidden-word|zebra-[0-9]+`)

// Slow is how long the slow fault waits before answering.
const Slow = 50 * time.Millisecond

// route is one emulator's path, as http.ServeMux patterns read it
// (method and path, without the prefix), and its handler.
type route struct {
	pattern string
	handler http.HandlerFunc
}

// routes are the emulators; each service's file adds its own (init).
var routes []route

// Handler serves the emulators under prefix (such as "/guard"), with the
// fault switches.
func Handler(prefix string) http.Handler {
	mux := http.NewServeMux()
	for _, r := range routes {
		method, path, _ := strings.Cut(r.pattern, " ")
		mux.HandleFunc(method+" "+prefix+path, r.handler)
		mux.HandleFunc(method+" "+prefix+"/faults/{fault}"+path, faulty(r.handler))
	}
	return mux
}

// faulty answers with the fault the path names, else as h.
func faulty(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("fault") {
		case "slow":
			select {
			case <-time.After(Slow):
			case <-r.Context().Done():
				return
			}
			h(w, r)
		case "429":
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":{"message":"rate limited"}}`, http.StatusTooManyRequests)
		case "500":
			http.Error(w, `{"error":{"message":"internal error"}}`, http.StatusInternalServerError)
		case "malformed":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"results": [`)) //nolint:errcheck // the client went away
		case "null":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`null`)) //nolint:errcheck // the client went away
		case "hang":
			// The server notices a client that left only once the body
			// is read.
			io.Copy(io.Discard, r.Body) //nolint:errcheck // a hang either way
			<-r.Context().Done()
		default:
			http.Error(w, "unknown fault", http.StatusNotFound)
		}
	}
}
