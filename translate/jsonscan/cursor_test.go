package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// grammarSeeds are JSON documents and near misses.
var grammarSeeds = []string{
	`1`, `-0`, `0.5e+7`, `-2.5E-3`, `"x"`, `true`, `false`, `null`, `[]`, `{}`, ` [ 1 , { "a" : [ ] } ] `,
	` {"a" : [1, -2.5e+3, true, false, null, "x\u0041"]} `, `{"a":{"b":[1,"]"]},"c":"\\"}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model","extra":{"deep":[[[{"x":[]}]]]}},"avgLogprobs":-0.5e-3,"citationMetadata":null}]}`,
	`01`, `.5`, `1.`, `+1`, `-`, `1e`, `"\u12"`, `"\x"`, `'x'`, `[1 2]`, `[1,]`, `{"a" 1}`, `{"a"}`, `{"a":1,}`, `{1:2}`, `[`, `]`,
	`{"a":1}}`, `{"a":1}x`, `{"a":1]`, `[1}`, "\"\x1f\"", "\"a\tb\"", `nul`, `nulls`, `tru`, `truex`, `truefalse`, `{"x":-}`, `{"x":[}`,
	strings.Repeat("[", 63) + strings.Repeat("]", 63),
	strings.Repeat("[", 70) + strings.Repeat("]", 70),
	strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat("}", 64),
	``, ` `,
}

// checkCursor checks that the cursor, and Valid, accept valid JSON only,
// and all of it but the deepest.
func checkCursor(t *testing.T, doc []byte) {
	t.Helper()
	cur := NewCursor(doc)
	v := cur.Skip()
	got, want := cur.End(), json.Valid(doc)
	if got && !want {
		t.Fatalf("the cursor took %q, which is not JSON", doc)
	}
	if !got && want && bytes.Count(doc, []byte("["))+bytes.Count(doc, []byte("{")) <= maxDepth {
		t.Fatalf("the cursor refused %q, which is JSON", doc)
	}
	if got && !bytes.Equal(v, bytes.TrimSpace(doc)) {
		t.Fatalf("Skip returned %q of %q", v, doc)
	}
	if Valid(doc) != got {
		t.Fatalf("Valid(%q) = %v, the cursor %v", doc, !got, got)
	}
}

func TestCursorMatchesValid(t *testing.T) {
	for _, doc := range grammarSeeds {
		checkCursor(t, []byte(doc))
	}
}

func FuzzCursor(f *testing.F) {
	for _, s := range grammarSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkCursor(t, doc)
		if cur := NewCursor(doc); cur.StringToken() != nil && cur.End() {
			checkToken(t, bytes.TrimSpace(doc))
		}
	})
}

// A reader walks an object's members and reads them by type; anything
// else fails it.
func TestCursorReads(t *testing.T) {
	doc := []byte(` {"s":"a\"b", "n":-12, "b":true, "a":[1,{"x":null}], "o":{}, "f":false} `)
	cur := NewCursor(doc)
	var got []string
	for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
		switch string(key) {
		case "s":
			got = append(got, string(cur.StringToken()))
		case "n":
			got = append(got, strconv.FormatInt(cur.Int(), 10))
		case "b", "f":
			if cur.Bool() {
				got = append(got, "true")
			}
		case "a":
			n := 0
			for more := cur.FirstElem(); more; more = cur.NextElem() {
				n++
				cur.Skip()
			}
			got = append(got, strings.Repeat("e", n))
		default:
			got = append(got, string(cur.Skip()))
		}
	}
	if !cur.End() || strings.Join(got, " ") != `"a\"b" -12 true ee {}` {
		t.Errorf("read %q (end %v)", got, cur.End())
	}
	for _, bad := range []string{`{"n":1.5}`, `{"n":"1"}`, `{"n":0123}`, `{"n":1234567890123456789}`, `{"b":null}`, `{"s":1}`, `{"s":"a"`, `[1]`} {
		cur := NewCursor([]byte(bad))
		for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
			switch string(key) {
			case "n":
				cur.Int()
			case "b":
				cur.Bool()
			case "s":
				cur.StringToken()
			}
		}
		if !cur.failed || cur.End() {
			t.Errorf("%s read", bad)
		}
	}
}

func TestOnceAndSkipUnknown(t *testing.T) {
	read := func(doc string) bool {
		cur := NewCursor([]byte(doc))
		var seen uint32
		for key, ok := cur.FirstKey(); ok; key, ok = cur.NextKey() {
			if string(key) == "text" {
				cur.Once(&seen, 1)
				cur.StringToken()
				continue
			}
			cur.SkipUnknown(key, []string{"text", "index"})
		}
		return cur.End()
	}
	for doc, want := range map[string]bool{
		`{"text":"a","other":[1]}`: true,
		`{"text":"a","text":"b"}`:  false,
		`{"Text":"a"}`:             false,
		`{"INDEX":1}`:              false,
		`{"te\u0078t":"a"}`:        false,
		`{"ſext":"a"}`:             false,
		`{"other":[1,}`:            false,
	} {
		if got := read(doc); got != want {
			t.Errorf("%s read: %v, want %v", doc, got, want)
		}
	}
}

// keyNames are field names for FuzzKeyMayMean; each has a struct type
// with one field of that name.
var keyNames = []string{"text", "type", "index", "contentBlockIndex", "k", "s", "finish_reason"}

// KeyMayMean is true of every key other than a name itself that
// encoding/json takes for that name.
func FuzzKeyMayMean(f *testing.F) {
	for _, k := range []string{"text", "TEXT", "te\\u0078t", "ſ", "K", "\\u212a", "Index", "index ", "finish_Reason", "x"} {
		f.Add(k)
	}
	types := make([]reflect.Type, len(keyNames))
	for i, name := range keyNames {
		types[i] = reflect.StructOf([]reflect.StructField{{Name: "F", Type: reflect.TypeFor[int](), Tag: reflect.StructTag(`json:"` + name + `"`)}})
	}
	f.Fuzz(func(t *testing.T, key string) {
		doc := []byte(`{"` + key + `":1}`)
		cur := NewCursor(doc)
		raw, ok := cur.FirstKey()
		if !ok || string(raw) != key {
			return // not a key as it stands
		}
		for i, name := range keyNames {
			v := reflect.New(types[i])
			if json.Unmarshal(doc, v.Interface()) != nil || v.Elem().Field(0).Int() != 1 {
				continue
			}
			if key != name && !KeyMayMean(raw, keyNames...) {
				t.Fatalf("encoding/json takes %q for %q, KeyMayMean does not", key, name)
			}
		}
	})
}
