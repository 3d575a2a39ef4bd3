package responses

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTruncate(t *testing.T) {
	big := func(typ string) json.RawMessage {
		return json.RawMessage(`{"type":"` + typ + `","x":"` + strings.Repeat("a", 400) + `"}`) // ~110 tokens
	}
	history := []json.RawMessage{big("message"), big("function_call"), big("function_call_output"), big("message"), big("message")}
	if got := Truncate(history, 0, 10000); len(got) != 5 {
		t.Errorf("fits: kept %d items, want 5", len(got))
	}
	got := Truncate(history, 100, 350)
	if len(got) != 2 || itemType(got[0]) != "message" {
		t.Errorf("kept %d items starting with %s, want the last 2 messages", len(got), itemType(got[0]))
	}
	// Dropping a call drops its output too: no orphaned function_call_output.
	got = Truncate(history, 100, 500)
	if len(got) == 0 || itemType(got[0]) == "function_call_output" {
		t.Errorf("kept %d items starting with %s", len(got), itemType(got[0]))
	}
	if got := Truncate(history, 100000, 1000); len(got) != 0 {
		t.Errorf("nothing fits: kept %d", len(got))
	}
}

func TestTruncationMode(t *testing.T) {
	r, _ := ParseRequest([]byte(`{"model":"m","input":"hi"}`))
	if r.Truncation() != "disabled" {
		t.Error("default truncation is not disabled")
	}
	r, _ = ParseRequest([]byte(`{"model":"m","input":"hi","truncation":"auto","max_output_tokens":100}`))
	if r.Truncation() != "auto" || r.Reserved() < 100 {
		t.Errorf("truncation %s, reserved %d", r.Truncation(), r.Reserved())
	}
}
