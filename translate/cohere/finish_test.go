package cohere

import "testing"

// Every finish_reason Cohere's v2 chat documents, mapped.
func TestFinishReasons(t *testing.T) {
	for reason, want := range map[string]string{
		"COMPLETE": "stop", "STOP_SEQUENCE": "stop", "MAX_TOKENS": "length", "TOOL_CALL": "tool_calls", "ERROR": "stop", "TIMEOUT": "stop",
	} {
		if got := finishReason(reason); got != want {
			t.Errorf("%s: %s, want %s", reason, got, want)
		}
	}
}
