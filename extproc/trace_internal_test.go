package extproc

import (
	"bytes"
	"testing"
)

func TestNoteFinishReasons(t *testing.T) {
	ex := &exchange{}
	ex.noteFinishReasons([]byte(`{"choices":[{"finish_reason": "stop"},{"finish_reason":null},{"finish_reason" :"length"}]}` +
		`data: {"choices":[{"delta":{},"finish_reason":"stop"}]}` + "\n\n" + `{"finish_reason":"tool_calls`))
	if len(ex.finishReasons) != 2 || ex.finishReasons[0] != "stop" || ex.finishReasons[1] != "length" {
		t.Errorf("finish reasons = %q", ex.finishReasons)
	}
}

// FuzzNoteFinishReasons: any answer bytes, no panic, and every reason kept
// is a string the bytes hold.
func FuzzNoteFinishReasons(f *testing.F) {
	f.Add([]byte(`{"finish_reason":"stop"}`))
	f.Add([]byte(`"finish_reason" : "length" "finish_reason":`))
	f.Add([]byte(`"finish_reason":"`))
	f.Fuzz(func(t *testing.T, out []byte) {
		ex := &exchange{}
		ex.noteFinishReasons(out)
		for _, r := range ex.finishReasons {
			if !bytes.Contains(out, []byte(`"`+r+`"`)) {
				t.Fatalf("reason %q is not in %q", r, out)
			}
		}
	})
}
