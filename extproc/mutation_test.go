package extproc

import (
	"slices"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

func setKeys(r *extprocv3.CommonResponse) []string {
	var keys []string
	for _, h := range r.GetHeaderMutation().GetSetHeaders() {
		keys = append(keys, h.GetHeader().GetKey())
	}
	return keys
}

// Replies set no header to the value it has already: the request's path
// and content type, and the answer's content type, are set only when the
// translation changes them.
func TestRepliesLeaveWhatIsSo(t *testing.T) {
	const body = `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`
	const answer = `{"id":"c","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	for _, c := range []struct {
		name, requestType, answerType string
		wantSet                       bool // content-type set on both
	}{
		{"as the translation leaves them", "application/json", "application/json", false},
		{"changed by the translation", "application/json; charset=utf-8", "application/json; charset=utf-8", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _, _ := newFaultServer(t)
			out := play(t, s, false, reqHeaders("content-type", c.requestType), reqBody(body),
				respHeaders(false, ":status", "200", "content-type", c.answerType), respBody(answer, true))
			req := setKeys(out[1].GetRequestBody().GetResponse())
			if slices.Contains(req, ":path") || !slices.Contains(req, "content-length") {
				t.Errorf("request headers set %q: want content-length and not :path", req)
			}
			if got := slices.Contains(req, "content-type"); got != c.wantSet {
				t.Errorf("request content-type %q: set %v, want %v", c.requestType, got, c.wantSet)
			}
			if got := slices.Contains(setKeys(out[2].GetResponseHeaders().GetResponse()), "content-type"); got != c.wantSet {
				t.Errorf("answer content-type %q: set %v, want %v", c.answerType, got, c.wantSet)
			}
		})
	}
}
