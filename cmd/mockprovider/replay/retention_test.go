package replay

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"modelgate/testdata"
)

// The mock keeps a bounded record of what it received, however many and
// however large the requests: at most KeptRequests, the most recent, each
// with at most KeptBodyBytes of its body (a copy, not a window on the
// whole body), while large bodies are still read and answered in full.
func TestRetainedRequestsAreBounded(t *testing.T) {
	s, err := New(Config{Recordings: testdata.Recordings, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	send := func(body []byte) int {
		req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer k")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w.Code
	}
	const bound = KeptRequests * KeptBodyBytes
	retained := func(t *testing.T) (reqs []Request) {
		t.Helper()
		reqs = s.Requests()
		total := 0
		for _, r := range reqs {
			total += cap(r.Body)
			if cap(r.Body) > KeptBodyBytes {
				t.Fatalf("a kept body holds %d bytes (%d of them visible), over %d", cap(r.Body), len(r.Body), KeptBodyBytes)
			}
		}
		if len(reqs) > KeptRequests || total > bound {
			t.Fatalf("%d requests with %d body bytes kept, want at most %d and %d", len(reqs), total, KeptRequests, bound)
		}
		return reqs
	}
	small := func(i int) []byte {
		return fmt.Appendf(nil, `{"model":"x","messages":[{"role":"user","content":"request %d"}]}`, i)
	}

	const many = 2000
	for i := range many {
		if code := send(small(i)); code != 200 {
			t.Fatalf("request %d: status %d", i, code)
		}
	}
	reqs := retained(t)
	if len(reqs) != KeptRequests {
		t.Fatalf("%d requests kept, want the last %d", len(reqs), KeptRequests)
	}
	for j, r := range reqs { // the most recent, oldest first
		if want := small(many - KeptRequests + j); !bytes.Equal(r.Body, want) || r.Truncated || r.Size != int64(len(want)) || r.Header.Get("Authorization") != "Bearer k" {
			t.Fatalf("kept request %d = %s (size %d, truncated %v), want %s", j, r.Body, r.Size, r.Truncated, want)
		}
	}

	big := []byte(`{"model":"x","messages":[{"role":"user","content":"` + strings.Repeat("a", 9<<20) + `"}]}`)
	for i := range 20 {
		if code := send(big); code != 200 {
			t.Fatalf("9 MiB request %d: status %d, want it parsed and answered", i, code)
		}
		reqs := retained(t)
		last := reqs[len(reqs)-1]
		if !last.Truncated || last.Size != int64(len(big)) || !bytes.Equal(last.Body, big[:KeptBodyBytes]) {
			t.Fatalf("kept 9 MiB request: %d bytes of %d, truncated %v; want its first %d bytes", len(last.Body), last.Size, last.Truncated, KeptBodyBytes)
		}
	}
	for i := range KeptRequests { // the large ones age out
		send(small(i))
	}
	total := 0
	for _, r := range retained(t) {
		total += len(r.Body)
	}
	if total > KeptRequests*len(small(many)) {
		t.Errorf("%d body bytes kept for %d small requests", total, KeptRequests)
	}
}

// A body over MaxBodyBytes is refused without being read.
func TestBodyOverLimitIsRefused(t *testing.T) {
	s, err := New(Config{Recordings: testdata.Recordings})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"x"}`))
	req.ContentLength = MaxBodyBytes + 1
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != 413 {
		t.Errorf("status %d, want 413: %s", w.Code, w.Body)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || !reqs[0].Truncated || reqs[0].Size != MaxBodyBytes+1 || len(reqs[0].Body) != 0 {
		t.Errorf("kept %+v", reqs)
	}
}
