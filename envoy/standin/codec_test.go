package standin

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"modelgate/envoy"
	"modelgate/envoy/routing"
)

// answerBound is how long a test waits for the stand-in's answer, or for
// it to close the connection: generous, as these assert behaviour, not
// speed, on loaded machines.
const answerBound = 30 * time.Second

// chunkedHead is a request whose body is chunked.
const chunkedHead = "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n" +
	"Transfer-Encoding: chunked\r\n\r\n"

// malformedChunked are chunked bodies whose framing Envoy's HTTP/1 codec
// (BalsaParser: INVALID_CHUNK_LENGTH, CHUNK_LENGTH_OVERFLOW) and net/http
// both refuse.
var malformedChunked = []struct{ name, body string }{
	{"chunk size not hexadecimal", "zz\r\nhello\r\n0\r\n\r\n"},
	{"chunk size over 64 bits", "10000000000000000\r\nhello\r\n0\r\n\r\n"},
	{"empty chunk size line", "\r\nhello\r\n0\r\n\r\n"},
	{"chunk shorter than its size", "5\r\nhel\r\n0\r\n\r\n"},
	{"next request before the last chunk", "5\r\nhello\r\nPOST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n\r\n"},
}

// A request whose chunked body cannot be parsed is Envoy's HTTP/1 codec
// error: a 400 "Bad Request" local reply (the generated local_reply_config
// maps no 400, so the body stays Envoy's), then the connection closes.
// From Envoy 1.37 ext_proc's response path gets that reply and holds it
// for the processor while the connection manager closes the connection:
// the client gets no answer (envoyproxy/envoy#29440). Either way the
// answer, or the close, comes at once.
func TestMalformedChunkedBody(t *testing.T) {
	for _, version := range []struct {
		name, envoy string
		answered    bool
	}{
		{"Envoy 1.36: local replies skip ext_proc", "1.36", true},
		{"Envoy 1.37: ext_proc holds the reply", "1.37", false},
	} {
		for _, m := range malformedChunked {
			t.Run(version.name+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				up := &upstreamRecorder{}
				proc := &stubProc{reply: routeTo("up")}
				e := startGenerated(t, backendUp(t, up), proc, nil, WithEnvoyVersion(version.envoy))
				resp, body, err := rawExchange(e.url, chunkedHead+m.body)
				if version.answered {
					if err != nil {
						t.Fatalf("no answer: %v", err)
					}
					if resp.StatusCode != http.StatusBadRequest || body != "Bad Request" || !resp.Close {
						t.Errorf("got %d %q (connection close %v), want 400 \"Bad Request\" and the connection closed", resp.StatusCode, body, resp.Close)
					}
				} else if !closedWithoutAnswer(err) {
					t.Fatalf("got %v, %v; want the connection closed without an answer", resp, err)
				}
				en := <-e.logs
				if en.Details != "http1.codec_error" || en.Flags != "DPE" {
					t.Errorf("access log: details %q, flags %q; want http1.codec_error, DPE", en.Details, en.Flags)
				}
				if up.count() != 0 {
					t.Errorf("the backend got %d requests", up.count())
				}
				for _, msg := range proc.messages() { // it may see the reply's headers before its stream is cancelled
					if h := msg.GetResponseHeaders(); h != nil && headerValue(h.GetHeaders().GetHeaders(), ":status") != "400" {
						t.Errorf("the processor got response headers %v", h)
					}
				}
			})
		}
	}
}

// From Envoy 1.37 what the client gets of the codec's reply is what
// ext_proc's response path lets through before the connection closes:
// nothing if it sends the headers to the processor, the headers if it
// holds only the body, everything if it holds nothing.
func TestMalformedChunkedBodyResponseModes(t *testing.T) {
	for _, tt := range []struct {
		name         string
		headers      filterv3.ProcessingMode_HeaderSendMode
		body         filterv3.ProcessingMode_BodySendMode
		status       int    // 0: no answer
		wantBody     string // what reading the body gets
		bodyComplete bool
	}{
		{"headers sent", filterv3.ProcessingMode_SEND, filterv3.ProcessingMode_BUFFERED, 0, "", false},
		{"body held", filterv3.ProcessingMode_SKIP, filterv3.ProcessingMode_BUFFERED, 400, "", false},
		{"nothing held", filterv3.ProcessingMode_SKIP, filterv3.ProcessingMode_NONE, 400, "Bad Request", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := start(t, &stubProc{}, nil, func(ep *filterv3.ExternalProcessor) {
				ep.ProcessingMode.ResponseHeaderMode, ep.ProcessingMode.ResponseBodyMode = tt.headers, tt.body
			})
			conn, err := dialBounded(e.url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, chunkedHead+malformedChunked[0].body)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if tt.status == 0 {
				if !closedWithoutAnswer(err) {
					t.Fatalf("got %v, %v; want the connection closed without an answer", resp, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			b, err := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || string(b) != tt.wantBody || (err == nil) != tt.bodyComplete {
				t.Errorf("got %d, body %q (%v); want %d, %q, complete %v", resp.StatusCode, b, err, tt.status, tt.wantBody, tt.bodyComplete)
			}
			if en := <-e.logs; en.Details != "http1.codec_error" || en.Flags != "DPE" {
				t.Errorf("access log: details %q, flags %q", en.Details, en.Flags)
			}
		})
	}
}

// A chunked body that just stops is no codec error. Envoy waits for the
// rest, as long as request_timeout allows (408, which the generated
// local_reply_config makes an OpenAI error); a client that closes its
// connection instead gets nothing back.
func TestIncompleteChunkedBody(t *testing.T) {
	t.Run("connection left open", func(t *testing.T) {
		clock := newTimerClock()
		e := startGenerated(t, backendUp(t, &upstreamRecorder{}), &stubProc{reply: routeTo("up")}, nil, WithClock(clock))
		done := make(chan error, 1)
		var resp *http.Response
		var body string
		go func() {
			var err error
			resp, body, err = rawExchange(e.url, chunkedHead+"5\r\nhello\r\n")
			done <- err
		}()
		for deadline := time.After(answerBound); ; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, `"code":"request_timeout"`) {
					t.Errorf("got %d %s, want 408 with the OpenAI error", resp.StatusCode, body)
				}
				return
			case <-deadline:
				t.Fatal("no answer")
			case <-time.After(20 * time.Millisecond):
				clock.Advance(time.Minute) // request_timeout is 120s as generated
			}
		}
	})
	t.Run("client closes", func(t *testing.T) {
		e := startGenerated(t, backendUp(t, &upstreamRecorder{}), &stubProc{reply: routeTo("up")}, nil)
		conn, err := dialBounded(e.url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, chunkedHead+"5\r\nhello\r\n")
		conn.(*net.TCPConn).CloseWrite()
		if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); !closedWithoutAnswer(err) {
			t.Fatalf("got %v, %v; want the connection closed", resp, err)
		}
		if en := <-e.logs; en.Details != "downstream_remote_disconnect" {
			t.Errorf("access log details %q", en.Details)
		}
	})
}

// backendUp is a gateway config with one backend, "up", served by up.
func backendUp(t *testing.T, up http.Handler) envoy.Config {
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	return envoy.Config{Routing: routing.Table{Backends: []routing.Backend{{Name: "up", BaseURL: srv.URL}}}}
}

// dialBounded connects to the stand-in; every read and write on the
// connection must be done within answerBound.
func dialBounded(url string) (net.Conn, error) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(answerBound))
	return conn, nil
}

// errHang is a stand-in that neither answered nor closed the connection
// within answerBound.
var errHang = errors.New("no answer and no close")

// rawExchange writes req on a new connection and reads the answer; err is
// what reading it failed with.
func rawExchange(url, req string) (*http.Response, string, error) {
	conn, err := dialBounded(url)
	if err != nil {
		return nil, "", err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		return nil, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(resp.Body)
		return resp, string(b), err
	}
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		err = errHang
	}
	return nil, "", err
}

// closedWithoutAnswer reports a read that found the connection closed.
func closedWithoutAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func headerValue(hs []*corev3.HeaderValue, key string) string {
	for _, h := range hs {
		if h.GetKey() == key {
			return string(h.GetRawValue())
		}
	}
	return ""
}
