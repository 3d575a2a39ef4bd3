package bedrock

import "testing"

// Every stopReason Converse documents, mapped.
func TestFinishReasons(t *testing.T) {
	for reason, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "model_context_window_exceeded": "length",
		"tool_use": "tool_calls", "guardrail_intervened": "content_filter", "content_filtered": "content_filter",
		"malformed_model_output": "stop", "malformed_tool_use": "stop",
	} {
		if got := finishReason(reason); got != want {
			t.Errorf("%s: %s, want %s", reason, got, want)
		}
	}
}
