package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A document is ambiguous when one of its objects, at any depth, names a
// member twice in any case or spelling encoding/json reads as the same.
func TestAmbiguousKeys(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		want bool
	}{
		{`{"a":1,"b":2}`, false},
		{`{"a":1,"a":2}`, true},
		{`{"content":"x","Content":"y"}`, true},
		{`{"messages":[{"role":"user","content":"x","CONTENT":"y"}]}`, true},
		{`{"messages":[{"role":"user","content":"x"},{"role":"user","content":"y"}]}`, false},
		{`{"\u0063ontent":"x","content":"y"}`, true},
		{`{"k":1,"\u212a":2}`, true}, // the Kelvin sign folds to k
		{`{"s":1,"ſ":2}`, true},      // and the long s to s
		{`{"a":{"b":1},"c":{"b":2}}`, false},
		{`[{"x":1},{"x":2}]`, false},
		{`{"a":"{\"b\":1,\"b\":2}"}`, false}, // a string is not an object
		{`{"a":1,"b":2,"c":3,"A":4}`, true},
		{`"text"`, false},
		{`{"a":`, false},
	} {
		if got := AmbiguousKeys([]byte(tt.doc)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.doc, got, tt.want)
		}
	}
}

// AmbiguousKeys agrees with a reference that walks encoding/json's
// tokens and folds names as strings.EqualFold compares them.
func FuzzAmbiguousKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":2}`, `{"content":[{"text":"a","Text":"b"}]}`, `{"x":{"y":[{"z":1}]}}`, `{"\u0041":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) {
			return
		}
		if got, want := AmbiguousKeys(doc), referenceAmbiguous(t, doc); got != want {
			t.Fatalf("%q: %v, want %v", doc, got, want)
		}
	})
}

// referenceAmbiguous walks doc's tokens, keeping each open object's
// names.
func referenceAmbiguous(t *testing.T, doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		object bool
		names  []string
		key    bool // the next token is a name
	}
	var stack []*frame
	found := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return found
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if name, ok := tok.(string); ok {
				for _, n := range top.names {
					found = found || strings.EqualFold(n, name)
				}
				top.names, top.key = append(top.names, name), false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true // a value ended: a name follows
		}
	}
}

// BenchmarkAmbiguousKeys reads a 100-turn conversation of about 60 KB,
// as an agent sends every turn.
func BenchmarkAmbiguousKeys(b *testing.B) {
	var doc bytes.Buffer
	doc.WriteString(`{"model":"m","stream":true,"max_tokens":1000,"messages":[`)
	for i := range 100 {
		if i > 0 {
			doc.WriteByte(',')
		}
		doc.WriteString(`{"role":"user","content":[{"type":"text","text":"Run the tests and tell me what failed, with the file names.","cache_control":{"type":"ephemeral"}}]},`)
		doc.WriteString(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"go test ./...","description":"run"}}]}`)
	}
	doc.WriteString(`]}`)
	b.SetBytes(int64(doc.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if AmbiguousKeys(doc.Bytes()) {
			b.Fatal("ambiguous")
		}
	}
}
