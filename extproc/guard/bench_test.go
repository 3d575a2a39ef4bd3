package guard_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"modelgate/extproc/guard"
	"modelgate/translate"
)

// BenchmarkAnswerChunk is the guard's cost for one streamed chunk of
// chat text (a regular expression that matches nothing, default
// windows), beside the translator's own, which the plain case measures:
// go test ./extproc/guard -run XXX -bench AnswerChunk.
func BenchmarkAnswerChunk(b *testing.B) {
	d := doors()[0]
	body := openAIStream(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200))
	chunks := cut(body, 1)
	for _, guarded := range []bool{false, true} {
		name := "plain"
		if guarded {
			name = "guarded"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				tr := d.newTr(&testing.T{})
				tr.ResponseHeaders(200, d.ct)
				var g *guard.Answer
				if guarded {
					g = guard.NewAnswer(guard.AnswerConfig{Rules: []*guard.Rule{{Name: "r", Action: guard.Block,
						Patterns: []*regexp.Regexp{zebra}, Kinds: []translate.TextKind{translate.TextAnswer}}},
						Window: guard.Window{Size: 128, Overlap: 64}, Dialect: d.dialect, Stream: true,
						Masker: guard.NewMasker(nil, ""), Usage: func() translate.Usage { return translate.Usage{} }})
				}
				for i, c := range chunks {
					out, _ := tr.ResponseBody(c, i == len(chunks)-1)
					if g != nil {
						g.Next(context.Background(), out, tr.Output().Texts, i == len(chunks)-1)
					}
				}
				n += len(chunks)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/chunk")
		})
	}
}
