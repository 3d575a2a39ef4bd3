package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestMembers(t *testing.T) {
	doc := []byte(` { "a" : 1 ,"b":[1, {"c":"}"}], "d\"e":null}`)
	ms, ok := Members(doc, nil)
	if !ok || len(ms) != 3 {
		t.Fatalf("Members = %d, %v", len(ms), ok)
	}
	want := []struct{ key, value string }{{"a", "1"}, {"b", `[1, {"c":"}"}]`}, {`d\"e`, "null"}}
	for i, w := range want {
		if string(ms[i].Key) != w.key || string(ms[i].Value) != w.value || string(doc[ms[i].VS:ms[i].End]) != w.value {
			t.Errorf("member %d = %q: %q", i, ms[i].Key, ms[i].Value)
		}
	}
	if !IsNull(ms[2].Value) || Kind(ms[1].Value) != Array || Kind(ms[0].Value) != Number || !IsInt(ms[0].Value) {
		t.Error("kinds are wrong")
	}
	if _, ok := Members([]byte(`[1]`), nil); ok {
		t.Error("an array has no members")
	}
}

// FuzzMembers checks that the members of any valid JSON object are the
// ones encoding/json sees, and that cutting them out leaves the object's
// braces.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,"]"]},"c":"\\"}`, ` {"x" : true , "y":-1.5e3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var want map[string]json.RawMessage
		if !json.Valid(doc) || json.Unmarshal(doc, &want) != nil {
			return
		}
		ms, ok := Members(doc, nil)
		if !ok {
			t.Fatalf("Members(%q) failed", doc)
		}
		rest := doc
		for i := len(ms) - 1; i >= 0; i-- {
			m := ms[i]
			var key string
			if err := json.Unmarshal(append(append([]byte{'"'}, m.Key...), '"'), &key); err != nil {
				t.Fatalf("key %q: %v", m.Key, err)
			}
			if _, ok := want[key]; !ok {
				t.Fatalf("key %q not in %q", key, doc)
			}
			if !json.Valid(m.Value) || !bytes.Equal(doc[m.VS:m.End], m.Value) {
				t.Fatalf("value %q of %q", m.Value, doc)
			}
			rest = append(append([]byte{}, rest[:m.Start]...), rest[m.End:]...)
		}
		if got := bytes.Join(bytes.Fields(rest), nil); string(got) != "{}" {
			t.Fatalf("cutting every member of %q left %q", doc, rest)
		}
	})
}

// ValidMembers lists what Members lists, offsets included, for whatever
// Valid takes for an object, and refuses the rest.
func FuzzValidMembers(f *testing.F) {
	for _, s := range []string{` {"a" : [1, {"b":"\u00e9"}] , "c":null } `, `{}`, `{"a":1,}`, `{"a":"\x"}`, `{"a":1} x`,
		`[1]`, `{"a" 1}`, `{"a":01}`, "{\"a\":\"\x01\"}", `{"a":[[[[[[[[]]]]]]]]}`, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, ok := ValidMembers(doc, nil)
		want, wantOK := Members(doc, nil)
		wantOK = wantOK && Valid(doc)
		if ok != wantOK {
			t.Fatalf("ValidMembers(%q) ok %v, want %v", doc, ok, wantOK)
		}
		if !ok {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("ValidMembers(%q) = %d members, want %d", doc, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.Start != w.Start || g.VS != w.VS || g.End != w.End {
				t.Fatalf("ValidMembers(%q) member %d = %+v, want %+v", doc, i, g, w)
			}
		}
	})
}

// SetString changes the values of the members it names and nothing else,
// and gives back the document itself when they already read as the text.
func TestSetString(t *testing.T) {
	for _, tt := range []struct {
		doc, key, s, want string
		changed           bool
	}{
		{`{"id":"x", "model" : "a-1" ,"n":{"model":"a-1"}}`, "model", "a", `{"id":"x", "model" : "a" ,"n":{"model":"a-1"}}`, true},
		{`{"m\u006fdel":"a-1","model":"b"}`, "model", "<a>", `{"m\u006fdel":"\u003ca\u003e","model":"\u003ca\u003e"}`, true},
		{`{"model":"a\u002d1"}`, "model", "a-1", `{"model":"a\u002d1"}`, false},
		{`{"model":7}`, "model", "a", `{"model":"a"}`, true},
		{`{"id":"model"}`, "model", "a", `{"id":"model"}`, false},
		{`["model"]`, "model", "a", `["model"]`, false},
	} {
		doc := []byte(tt.doc)
		got, changed := SetString(doc, 0, tt.key, tt.s)
		if string(got) != tt.want || changed != tt.changed {
			t.Errorf("SetString(%s, %q) = %s, %v; want %s, %v", tt.doc, tt.s, got, changed, tt.want, tt.changed)
		}
		if tt.want == tt.doc && &got[0] != &doc[0] {
			t.Errorf("SetString(%s) copied a document it did not change", tt.doc)
		}
	}
	doc := []byte(`{"a":1,"n":{"model":"x"}}`)
	if got, _ := SetString(doc, bytes.IndexByte(doc[1:], '{')+1, "model", "y"); string(got) != `{"a":1,"n":{"model":"y"}}` {
		t.Errorf("nested: %s", got)
	}
}

// Any valid object, given a model by SetString, is valid JSON that
// encoding/json reads as the object with that model, and the object
// itself when it had none.
func FuzzSetString(f *testing.F) {
	for _, s := range []string{`{"model":"a"}`, ` {"id":1 , "model" :"b\u0022" ,"model":null}`, `{"mod\u0065l":{"model":"x"}}`, `{}`, `[{"model":"a"}]`} {
		f.Add([]byte(s), "a")
	}
	f.Fuzz(func(t *testing.T, doc []byte, s string) {
		var before map[string]json.RawMessage
		if !json.Valid(doc) || json.Unmarshal(doc, &before) != nil || before == nil {
			return
		}
		got, changed := SetString(doc, SkipSpace(doc, 0), "model", s)
		var after map[string]json.RawMessage
		if err := json.Unmarshal(got, &after); err != nil {
			t.Fatalf("SetString(%q) = %q: %v", doc, got, err)
		}
		_, had := before["model"]
		var model, want string
		json.Unmarshal(must(json.Marshal(s)), &want) //nolint:errcheck // s as a client reads it
		if changed && !had || !changed && !bytes.Equal(got, doc) || had && (json.Unmarshal(after["model"], &model) != nil || model != want) {
			t.Fatalf("SetString(%q, %q) = %q, changed %v", doc, s, got, changed)
		}
		delete(before, "model")
		delete(after, "model")
		for k, v := range before {
			if !bytes.Equal(jsonscanCompact(v), jsonscanCompact(after[k])) {
				t.Fatalf("SetString(%q) changed %q: %q", doc, k, got)
			}
		}
	})
}

func jsonscanCompact(v []byte) []byte {
	var b bytes.Buffer
	json.Compact(&b, v) //nolint:errcheck // decoded values
	return b.Bytes()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
