package extproc

import (
	"strconv"
	"testing"
)

// A buffered answer the translation leaves as it came goes on without a
// body mutation (Envoy passes the provider's bytes on, its length with
// them); one it changes is replaced, with its new length. Both are
// charged.
func TestBufferedAnswerKeptAsItCame(t *testing.T) {
	const plain = `{"model":"plain","messages":[{"role":"user","content":"hi"}]}`
	valid := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"plain","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"Hello!","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`
	// A top-level null the schema forbids: the translation drops it.
	fixed := valid[:len(valid)-1] + `,"system_fingerprint":null}`
	for name, tc := range map[string]struct {
		answer  string
		changed bool
	}{"valid": {valid, false}, "fixed": {fixed, true}} {
		t.Run(name, func(t *testing.T) {
			s, usage, _ := newFallbackServer(t)
			out := play(t, s, false, reqHeaders("content-type", "application/json"), reqBody(plain),
				respHeaders(false, ":status", "200", "content-type", "application/json", "content-length", strconv.Itoa(len(tc.answer))),
				respBody(tc.answer, true))
			last := out[3].GetResponseBody().GetResponse()
			if last == nil {
				t.Fatalf("answered %v", out[3])
			}
			body := last.GetBodyMutation().GetBody()
			length := setHeaders(last.GetHeaderMutation())["content-length"]
			switch {
			case !tc.changed && (last.GetBodyMutation() != nil || last.GetHeaderMutation() != nil):
				t.Errorf("an answer kept as it came is replaced: %v", last)
			case tc.changed && (string(body) != valid || length != strconv.Itoa(len(valid))):
				t.Errorf("replaced with %s (content-length %s), want %s", body, length, valid)
			}
			if out[3].GetDynamicMetadata() == nil {
				t.Error("no usage metadata on the last reply")
			}
			if rec := usage.only(t); rec.Status != 200 || rec.PromptTokens != 9 || rec.CompletionTokens != 3 {
				t.Errorf("record %+v", rec)
			}
		})
	}
}
