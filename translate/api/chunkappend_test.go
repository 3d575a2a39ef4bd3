package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The appended chunks are the ones Delta and Chunk write, for any stream
// and any text, escaped or not.
func FuzzDeltaChunks(f *testing.F) {
	for _, tok := range []string{`""`, `" there"`, `"\n\"<b>&amp;\u2028\ud83d\ude00\ud800"`, "\"caf\xc3\xa9 \xff\"", `"{\"city\":\"Par"`} {
		f.Add("chatcmpl-1", "model<&>\u2028é\xff", int64(1700000000), []byte(tok), 3)
	}
	f.Fuzz(func(t *testing.T, id, model string, created int64, tok []byte, index int) {
		var text string
		if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' || json.Unmarshal(tok, &text) != nil {
			return // not a string token
		}
		w := ChunkWriter{ID: id, Model: model, Created: created}
		var d DeltaChunks
		for _, w := range []ChunkWriter{{ID: "other"}, w, w} { // Use again, and for another stream
			d.Use(w)
		}
		check := func(got, want []byte) {
			t.Helper()
			if !bytes.Equal(got, want) {
				t.Fatalf("text %s of %q, %q\n got %q\nwant %q", tok, id, model, got, want)
			}
		}
		before := []byte("before")
		check(d.Content(before, tok), w.Delta(before, Delta{Content: &text}, nil))
		if text != "" {
			check(d.Reasoning(before, tok), w.Delta(before, Delta{ReasoningContent: text}, nil))
		}
		call := ToolCall{Index: &index, Function: FunctionCall{Arguments: text}}
		check(d.ToolArguments(before, index, tok), w.Delta(before, Delta{ToolCalls: []ToolCall{call}}, nil))
		choice := []byte(`{"index":0,"delta":{},"finish_reason":null}`)
		check(append(append(w.ChunkHead(), choice...), ChunkTail...), w.Chunk(nil, ChatCompletionChunk{Choices: []ChunkChoice{{}}}))
	})
}
