package anthropic

import "testing"

// Every stop_reason the Messages API documents, mapped.
func TestFinishReasons(t *testing.T) {
	for reason, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
		"model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter",
	} {
		if got := finishReason(reason); got != want {
			t.Errorf("%s: %s, want %s", reason, got, want)
		}
	}
}
