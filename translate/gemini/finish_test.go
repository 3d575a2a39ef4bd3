package gemini

import "testing"

// Every finishReason Gemini and Vertex AI document, mapped (the
// FinishReason enums of generativelanguage v1beta and aiplatform v1).
func TestFinishReasons(t *testing.T) {
	for reason, want := range map[string]string{
		"FINISH_REASON_UNSPECIFIED": "stop", "STOP": "stop", "MAX_TOKENS": "length",
		"SAFETY": "content_filter", "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
		"PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter", "MODEL_ARMOR": "content_filter",
		"IMAGE_SAFETY": "content_filter", "IMAGE_PROHIBITED_CONTENT": "content_filter", "IMAGE_RECITATION": "content_filter",
		"LANGUAGE": "stop", "OTHER": "stop", "IMAGE_OTHER": "stop", "NO_IMAGE": "stop",
		"MALFORMED_FUNCTION_CALL": "stop", "UNEXPECTED_TOOL_CALL": "stop", "TOO_MANY_TOOL_CALLS": "stop",
		"MISSING_THOUGHT_SIGNATURE": "stop", "MALFORMED_RESPONSE": "stop", "": "stop",
	} {
		if got := finishReason(reason, false); got != want {
			t.Errorf("%s: %s, want %s", reason, got, want)
		}
	}
	if got := finishReason("STOP", true); got != "tool_calls" {
		t.Errorf("STOP with calls: %s", got)
	}
	if got := finishReason("SAFETY", true); got != "content_filter" {
		t.Errorf("SAFETY with calls: %s", got)
	}
}
