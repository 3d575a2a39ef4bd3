package redact

import (
	"math/rand/v2"
	"strings"
	"testing"

	"modelgate/extproc/redact/redacttest"
)

// FuzzRedaction: any body, cut or whole, never panics and never keeps a
// credential or the value of a member the rules name.
func FuzzRedaction(f *testing.F) {
	f.Add([]byte(`{"content":"SECRET","x":"sk-abcdefghijklmnopqrstu"}`), false)
	f.Add([]byte("data: {\"content\":\"SECRET\"}\n\ndata: [DONE]\n\n"), true)
	f.Add([]byte(`[{"a":{"content":["SECRET"]}}]`), false)
	f.Add([]byte("plain text sk-abcdefghijklmnopqrstu"), false)
	f.Add([]byte(`{"Content":"SECRET"}`), false)
	f.Add([]byte("data: {\"type\":\"response.output_text.delta\",\"delta\":\"SECRET\"}\n\n"), false)
	r := Rules{Members: []string{"content"}}
	f.Fuzz(func(t *testing.T, body []byte, truncated bool) {
		out := r.Apply(body, truncated)
		if out2 := r.Scrub(out); out2 != out {
			t.Fatalf("%q kept a credential: %q", body, out)
		}
		// SECRET only as the member's value: elsewhere it is text to keep
		n := strings.Count(strings.ToLower(string(body)), `"content":"secret"`)
		if n > 0 && n == strings.Count(string(body), "SECRET") && strings.Contains(out, "SECRET") {
			t.Fatalf("%q kept a redacted member's value: %q", body, out)
		}
	})
}

// FuzzCredentialRedaction: a credential of any listed shape, put anywhere
// in a fuzzed body (JSON, a stream, text), or split across two events of
// a stream the fuzzed bytes follow, is never kept.
func FuzzCredentialRedaction(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), uint16(40), uint8(0), uint64(1), false, uint8(0))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"ab\"}}]}\n\ndata: [DONE]\n\n"), uint16(33), uint8(5), uint64(2), false, uint8(7))
	f.Add([]byte(`"x"`), uint16(1), uint8(30), uint64(3), false, uint8(0))
	f.Add([]byte(`{"a":"\`), uint16(7), uint8(36), uint64(4), false, uint8(0))
	f.Add([]byte(`{"api_key":""}`), uint16(12), uint8(44), uint64(5), false, uint8(0))
	f.Add([]byte(`plain`), uint16(2), uint8(12), uint64(6), true, uint8(0))
	samples := redacttest.Samples()
	f.Fuzz(func(t *testing.T, body []byte, at uint16, which uint8, seed uint64, truncated bool, split uint8) {
		s := samples[int(which)%len(samples)]
		text, secret := s.Make(rand.New(rand.NewPCG(seed, seed)))
		var in []byte
		if split > 0 {
			// a stream whose events carry the credential in two pieces
			k := 1 + int(split)%(len(text)-1)
			in = []byte("data: {\"choices\":[{\"delta\":{\"content\":" + quote(text[:k]) + "}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"content\":" + quote(text[k:]) + "}}]}\n\n")
			// then the fuzzed bytes: a stream's events are redacted as one
			// text only when the body is a stream (see TestRedactionRules
			// for what a body that is not one keeps)
			in = append(in, body...)
		} else {
			p := int(at) % (len(body) + 1)
			in = append(append(append([]byte{}, body[:p]...), text...), body[p:]...)
		}
		for _, r := range []Rules{{}, {Members: []string{"content"}}} {
			if out := r.Apply(in, truncated); strings.Contains(out, secret) {
				t.Fatalf("%s: %q kept in %q (from %q)", s.Name, secret, out, in)
			}
		}
	})
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Member rules ignore case, cover the text of Responses stream events,
// and credentials are found across a stream's events, behind JSON escapes
// and in member names.
func TestRedactionRules(t *testing.T) {
	key := "sk-proj-" + strings.Repeat("Ab3_", 10)
	content := Rules{Members: []string{"content"}}
	for _, c := range []struct {
		name       string
		r          Rules
		body, want string
	}{
		{"member case", content, `{"Content":"a","CONTENT":"b","content":"c","contents":"d"}`,
			`{"CONTENT":"[redacted]","Content":"[redacted]","content":"[redacted]","contents":"d"}`},
		{"member case in a cut body", content, `"Content": "diary`, `[17 bytes not kept: cut or not JSON, so they could not be redacted by member]`},
		{"responses text delta", content,
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\"secret diary\"}\n",
			"event: response.output_text.delta\ndata: {\"delta\":\"[redacted]\",\"item_id\":\"msg_1\",\"type\":\"response.output_text.delta\"}\n"},
		{"responses text done and part", content,
			"data: {\"type\":\"response.output_text.done\",\"text\":\"secret diary\"}\n\ndata: {\"type\":\"response.content_part.done\",\"part\":{\"type\":\"output_text\",\"text\":\"secret diary\"}}\n",
			"data: {\"text\":\"[redacted]\",\"type\":\"response.output_text.done\"}\n\ndata: {\"part\":\"[redacted]\",\"type\":\"response.content_part.done\"}\n"},
		{"responses arguments delta", Rules{Members: []string{"arguments"}},
			"data: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{\\\"city\\\"\"}\n",
			"data: {\"delta\":\"[redacted]\",\"type\":\"response.function_call_arguments.delta\"}\n"},
		{"chat deltas are not events", Rules{Members: []string{"arguments"}},
			"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n",
			"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n"},
		{"key split across events", Rules{},
			"data: {\"delta\":{\"text\":\"my key: " + key[:10] + "\"}}\n\ndata: {\"delta\":{\"text\":\"" + key[10:] + " ok\"}}\n",
			"data: {\"delta\":{\"text\":\"my key: [redacted]\"}}\n\ndata: {\"delta\":{\"text\":\"[redacted] ok\"}}\n"},
		{"key split across text events", Rules{},
			"data: " + key[:12] + "\n\ndata: " + key[12:] + "\n",
			"data: [redacted]\n\ndata: [redacted]\n"},
		{"key behind an escape", Rules{}, `{"a":"\npm_` + strings.Repeat("x1", 18) + `"}`, `{"a":"[redacted]"}`},
		{"key as a member name", Rules{}, `{"` + key + `":1}`, `{"[redacted]":1}`},
		{"value after a key-like member", Rules{}, `{"api_key":"0123456789abcdef0123456789abcdef"}`, `{"api_key":"[redacted]"}`},
		{"a label inside a labelled value", Rules{}, `api_key x_aws_secret_access_key = ` + strings.Repeat("Ab+/", 10),
			`api_key [redacted] = [redacted]`},
		{"exact secret", Rules{Secrets: []string{"provider-secret-1", "short"}}, `{"a":"xprovider-secret-1y short"}`, `{"a":"x[redacted]y short"}`},
		// A credential over several lines of a stream is found before a
		// line is dropped, and across a "data:" line and the lines after it.
		{"PEM block whose header line is dropped", content,
			"data: x\n[-----BEGIN RSA PRIVATE KEY-----\n" + pemLine + "\n" + pemLine + "\n-----END RSA PRIVATE KEY-----\ndata: y",
			"data: x\n[not kept: could not be redacted by member]\n[redacted]\n[redacted]\n[redacted]\ndata: y"},
		{"cut PEM block whose header line is dropped", content,
			"data:{-----BEGIN OPENSSH PRIVATE KEY-----\n" + pemLine,
			"data: [not kept: could not be redacted by member]\n[redacted]"},
		{"PEM block after a data line", Rules{},
			"data: -----BEGIN PRIVATE KEY-----\n" + pemLine + "\n-----END PRIVATE KEY-----\n\ndata: {\"a\":1}\n",
			"data: [redacted]\n[redacted]\n[redacted]\n\ndata: {\"a\":1}\n"},
		{"PEM block around an event", Rules{},
			"data: x\n-----BEGIN PRIVATE KEY-----\ndata: {\"a\":1}\n" + pemLine + "\n-----END PRIVATE KEY-----",
			"data: x\n[redacted]\ndata: {\"a\":1}\n[redacted]\n[redacted]"},
		{"value after a label on a dropped line", content,
			"data: x\n{\"api_key\":\n \"0123456789abcdef0123456789abcdef\"",
			"data: x\n[not kept: could not be redacted by member]\n \"[redacted]\""},
	} {
		if got := c.r.Apply([]byte(c.body), false); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// pemLine is a line of a PEM block's base64.
const pemLine = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi0Q2RmZDHkmsH6bSR7nh4GCRMh"

// benchStream is a 64 KiB chat stream of short deltas.
func benchStream() []byte {
	var b strings.Builder
	for i := 0; b.Len() < 64<<10; i++ {
		b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"word `)
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(` "},"finish_reason":null}]}` + "\n\n")
	}
	return []byte(b.String())
}

// Redaction runs once per captured exchange, when it ends (not per
// chunk); these measure a full 64 KiB capture.
func BenchmarkRedactStream(b *testing.B) {
	body := benchStream()
	r := Rules{Secrets: []string{"provider-secret-key-123"}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r.Apply(body, false)
	}
}

func BenchmarkRedactJSON(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 1400) + `"}]}`)
	r := Rules{Secrets: []string{"provider-secret-key-123"}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r.Apply(body, false)
	}
}

// The scanner is linear: 64 KiB made of the formats' prefixes and labels
// repeated, which start a match everywhere, are searched a bounded number
// of times over (Go's regexp is linear in what it searches), not once
// from every match. Its speed is BenchmarkRedactRepeated's to measure.
func TestRedactionNotPathological(t *testing.T) {
	total := 0
	searched = func(n int) { total += n }
	t.Cleanup(func() { searched = nil })
	for _, unit := range []string{"sk-", "eyJ", "-----BEGIN PRIVATE KEY-----", "api_key=", "Bearer ", "secret ", "xoxb-", "SG.", "ghp_",
		"data: -----BEGIN PRIVATE KEY-----\n", "data: x\napi_key=\n"} {
		s := strings.Repeat(unit, (64<<10)/len(unit))
		total = 0
		(Rules{}).Apply([]byte(s), false)
		// Apply searches the text, then the redacted text (in passes that
		// each search it whole, at most a few), and from each match the
		// label it may end with (maxLabelLen bytes).
		if limit := 8*len(s) + 2*maxLabelLen*len(s)/len(unit); total > limit {
			t.Errorf("%q repeated: %d bytes searched for %d, over %d", unit, total, len(s), limit)
		}
	}
}

// 64 KiB of the formats' prefixes repeated: the scanner's worst inputs.
func BenchmarkRedactRepeated(b *testing.B) {
	for _, unit := range []string{"eyJ", "-----BEGIN PRIVATE KEY-----", "api_key="} {
		s := []byte(strings.Repeat(unit, (64<<10)/len(unit)))
		b.Run(strings.Trim(unit, "-= "), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				(Rules{}).Apply(s, false)
			}
		})
	}
}
