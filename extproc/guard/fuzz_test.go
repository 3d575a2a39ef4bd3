package guard_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"modelgate/extproc/guard"
	"modelgate/translate"
)

// Whatever a provider streams (the translators' output of it, in any
// chunks), the guard never panics, a monitor rule changes no byte, and a
// mask rule lets no match of its pattern through in the text it reports.
func FuzzAnswer(f *testing.F) {
	f.Add(openAIStream(answer), uint64(1))
	f.Add(openAIStream("zebra-1 zebra-22 \u00e9\\\"zebra-333"), uint64(2))
	f.Add(anthropicStream(answer), uint64(3))
	short := regexp.MustCompile(`zeb[a-z]*-[0-9]+`)
	f.Fuzz(func(t *testing.T, body []byte, seed uint64) {
		for _, d := range doors()[:3] { // chat on OpenAI and Anthropic, Messages on Anthropic
			d.answer = func(string) []byte { return body }
			if !translates(t, d, seed) {
				continue // the translator refuses it: no answer to guard
			}
			plain := play(t, d, nil, seed)
			rule := &guard.Rule{Name: "r", Action: guard.Monitor, Patterns: []*regexp.Regexp{short}, Kinds: []translate.TextKind{translate.TextAnswer}}
			g := guard.NewAnswer(guard.AnswerConfig{Rules: []*guard.Rule{rule}, Window: guard.Window{Size: 8, Overlap: 16}, Dialect: d.dialect,
				Stream: true, Masker: guard.NewMasker(nil, ""), Usage: func() translate.Usage { return translate.Usage{} }})
			if p := play(t, d, g, seed); !bytes.Equal(sameIDs(p.out), sameIDs(plain.out)) {
				t.Fatalf("%s: monitored output differs", d.name)
			}
			mask := *rule
			mask.Action = guard.Mask
			g = guard.NewAnswer(guard.AnswerConfig{Rules: []*guard.Rule{&mask}, Window: guard.Window{Size: 8, Overlap: 16}, Dialect: d.dialect,
				Stream: true, Masker: guard.NewMasker(nil, ""), Usage: func() translate.Usage { return translate.Usage{} }})
			if p := play(t, d, g, seed); longMatch(short, p.text) {
				t.Fatalf("%s: a match of at most the overlap reached the client: %q", d.name, p.text)
			}
		}
	})
}

// longMatch reports a match of re in s no longer than 16 bytes (the
// windows' overlap, in characters at least as many).
func longMatch(re *regexp.Regexp, s string) bool {
	for _, m := range re.FindAllString(s, -1) {
		if len(m) <= 16 && !strings.Contains(m, "masked") {
			return true
		}
	}
	return false
}

// translates reports that d's translator takes the answer in seed's
// chunks without an error.
func translates(t *testing.T, d door, seed uint64) bool {
	tr := d.newTr(t)
	tr.ResponseHeaders(200, d.ct)
	chunks := cut(d.answer(""), seed)
	for i, c := range chunks {
		if _, err := tr.ResponseBody(c, i == len(chunks)-1); err != nil {
			return false
		}
	}
	return len(chunks) > 0
}
