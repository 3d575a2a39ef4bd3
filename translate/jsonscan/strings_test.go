package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The string helpers must write and read what encoding/json does: these
// tests hold them to it on the seeds, and fuzzing on anything.

var quotedSeeds = []string{"", "plain", `quote " backslash \ slash /`, "<tag>&amp;", "\b\f\n\r\t\x00\x01\x1f\x7f",
	"é ü 日本 \U0001F600", "\u2028\u2029", "\xff", "a\xc3(b", "\xed\xa0\x80", "\xef\xbf\xbd", "\xf0\x9f\x98",
	`<a href="x">&amp;</a>`, "caf\xc3\xa9", "bad\xffbyte"}

func TestAppendQuotedMatchesMarshal(t *testing.T) {
	for _, s := range quotedSeeds {
		checkQuoted(t, []byte(s))
	}
}

func checkQuoted(t *testing.T, s []byte) {
	t.Helper()
	want, _ := json.Marshal(string(s))
	if got := AppendQuoted([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
		t.Fatalf("AppendQuoted(%q) = %s, want %s", s, got[1:], want)
	}
	if got := AppendQuoted(nil, string(s)); !bytes.Equal(got, want) {
		t.Fatalf("AppendQuoted(string %q) = %s, want %s", s, got, want)
	}
}

// tokenSeeds are string tokens, escaped and not, valid UTF-8 and not.
var tokenSeeds = []string{`""`, `"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u0000\u001F\u007f\u003C\u003e\u0026"`, `"\u00e9\u65E5"`,
	`"\u0041\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\uD83D\uDe00"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`,
	`"\ud83d\ud83d\ude00"`, `"\u2028\u2029"`, "\"\u2028\xff<\"", `"\ufffd"`, "\"caf\xc3\xa9\"", "\"bad\xffbyte\"", "\"\xed\xa0\x80\"",
	`"{\"city\":\"Paris\"}"`, `"<b>&amp;</b>"`, `"a\"b\\c\/d"`, `"\u2028"`, "\"\x7f\""}

func TestTokensMatchUnmarshal(t *testing.T) {
	for _, tok := range tokenSeeds {
		if !checkToken(t, []byte(tok)) {
			t.Errorf("%s is no JSON string", tok)
		}
	}
	for _, v := range []string{``, `"`, `null`, `1`} {
		if got := Unquote([]byte(v), nil); got != nil {
			t.Errorf("Unquote(%s) = %q, want nil", v, got)
		}
	}
}

// checkToken checks AppendTokenBody and Unquote on tok, if it is a JSON
// string, and reports whether it was.
func checkToken(t *testing.T, tok []byte) bool {
	t.Helper()
	var s string
	if json.Unmarshal(tok, &s) != nil || len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return false // not a token (or one with white space around it)
	}
	want, _ := json.Marshal(s)
	if got := append(AppendTokenBody([]byte{'"'}, tok), '"'); !bytes.Equal(got, want) {
		t.Fatalf("AppendTokenBody(%s) = %s, want %s", tok, got, want)
	}
	scratch := []byte("left over")
	if got := Unquote(tok, &scratch); string(got) != s {
		t.Fatalf("Unquote(%s) = %q, want %q", tok, got, s)
	}
	if !IsText(tok, s) || IsText(tok, s+"x") || s != "" && IsText(tok, s[:len(s)-1]) {
		t.Fatalf("IsText(%s) is not true of %q alone", tok, s)
	}
	if s != string(tok[1:len(tok)-1]) && IsText(tok, string(tok[1:len(tok)-1])) {
		t.Fatalf("IsText(%s) is true of its escaped body", tok)
	}
	return true
}

// IsText is false of any value but a string.
func TestIsTextOfOtherValues(t *testing.T) {
	for _, v := range []string{``, `"`, `null`, `1`, `["a"]`, `{"a":"a"}`} {
		if IsText([]byte(v), "a") || IsText([]byte(v), "") {
			t.Errorf("IsText(%s) is true", v)
		}
	}
}

// IsText of a short text decoded from escapes allocates nothing.
func TestIsTextAllocations(t *testing.T) {
	tok := []byte(`"claude-sonnet-4\u002d0"`)
	if n := testing.AllocsPerRun(100, func() { IsText(tok, "claude-sonnet-4-0") }); n != 0 {
		t.Errorf("%.0f allocations", n)
	}
}

// AppendTokenBody of tokens in a row is the body of their concatenation.
func TestAppendTokenBodyConcatenates(t *testing.T) {
	var got []byte
	var text string
	for _, tok := range tokenSeeds {
		got = AppendTokenBody(got, []byte(tok))
		var s string
		if err := json.Unmarshal([]byte(tok), &s); err != nil {
			t.Fatal(err)
		}
		text += s
	}
	want, _ := json.Marshal(text)
	if string(want) != `"`+string(got)+`"` {
		t.Errorf("bodies %s\nwant %s", got, want)
	}
}

// Any text encodes, and any string literal of it decodes, as
// encoding/json does.
func FuzzStrings(f *testing.F) {
	for _, s := range quotedSeeds {
		f.Add([]byte(s))
	}
	for _, s := range tokenSeeds {
		f.Add([]byte(s[1 : len(s)-1]))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkQuoted(t, body)
		checkToken(t, append(append([]byte(`"`), body...), '"'))
	})
}
