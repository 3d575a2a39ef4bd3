package replay

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"modelgate/testdata"
)

func start(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	cfg.Recordings = testdata.Recordings
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func post(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func recorded(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../../testdata/fixtures/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestScenariosReplayRecordedBytes(t *testing.T) {
	_, ts := start(t, Config{})
	tests := []struct {
		name, body, file string
		status           int
	}{
		{"json", `{"model":"x"}`, "openai/chat/chat-basic.bodies/00.response.json", 200},
		{"stream", `{"model":"x","stream":true}`, "openai/chat/chat-streaming.bodies/00.response.sse", 200},
		{"tools", `{"model":"mock-tools"}`, "openai/chat/chat-tools.bodies/00.response.json", 200},
		{"error 400", `{"model":"mock-error-400"}`, "openai/errors/chat-bad-request.bodies/00.response.json", 400},
		{"error 404", `{"model":"mock-error-404"}`, "openai/errors/chat-unknown-model.bodies/00.response.json", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, ts.URL, "", tt.body)
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !bytes.Equal(got, recorded(t, tt.file)) {
				t.Errorf("status %d, body %d bytes; want %d and the bytes of %s", resp.StatusCode, len(got), tt.status, tt.file)
			}
		})
	}
}

func TestTruncatedEndsMidEventWithoutDone(t *testing.T) {
	_, ts := start(t, Config{})
	got, _ := io.ReadAll(post(t, ts.URL, "", `{"model":"mock-truncated","stream":true}`).Body)
	if bytes.Contains(got, []byte("[DONE]")) || bytes.HasSuffix(got, []byte("\n\n")) || len(got) == 0 {
		t.Errorf("truncated stream = %q, want a cut mid-event without [DONE]", got)
	}
}

func TestChunkingSplitsWrites(t *testing.T) {
	_, ts := start(t, Config{ChunkSize: 7, Delay: 50 * time.Millisecond})
	r := bufio.NewReader(post(t, ts.URL, "", `{"model":"x","stream":true}`).Body)
	first := make([]byte, 64)
	n, err := r.Read(first)
	if err != nil || n != 7 {
		t.Errorf("first read = %d bytes (%v), want one 7-byte write", n, err)
	}
}

func TestAuthAndRecording(t *testing.T) {
	s, ts := start(t, Config{APIKey: "provider-key"})
	if resp := post(t, ts.URL, "wrong", `{"model":"x"}`); resp.StatusCode != 401 {
		t.Errorf("wrong key: status %d, want 401", resp.StatusCode)
	}
	if resp := post(t, ts.URL, "provider-key", `{"model":"x"}`); resp.StatusCode != 200 {
		t.Errorf("right key: status %d, want 200", resp.StatusCode)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[1].Header.Get("Authorization") != "Bearer provider-key" || string(reqs[1].Body) != `{"model":"x"}` {
		t.Errorf("recorded requests = %+v", reqs)
	}
}

func FuzzChatRequest(f *testing.F) {
	s, err := New(Config{Recordings: testdata.Recordings})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"model":"mock-truncated","stream":true}`))
	f.Add([]byte(`{"stream_options":null}`))
	f.Add([]byte(`{"model":"mock-tools","stream":true,"stream_options":{"include_usage":true}}`))
	f.Add([]byte(`{"model":"mock-ollama","stream":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body)))
		if w.Code != 200 && w.Code != 400 && w.Code != 404 {
			t.Fatalf("status %d for %q", w.Code, body)
		}
	})
}
