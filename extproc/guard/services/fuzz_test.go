package services

import (
	"testing"

	"modelgate/extproc/guard"
)

// fuzzService is the service of typ, for its answer parser.
func fuzzService(f *testing.F, typ string) guard.Service {
	f.Helper()
	svc, err := New(Spec{Name: "fuzzed", Type: typ, URL: "http://guard.invalid", APIKey: "k"})
	if err != nil {
		f.Fatal(err)
	}
	return svc
}

// checkVerdict fails if a verdict made without an error has a span out
// of text or empty, or spans without being flagged or where the
// contract has none.
func checkVerdict(t *testing.T, text string, v guard.Verdict, err error, spans bool) {
	t.Helper()
	if err != nil {
		if v.Flagged || v.Spans != nil {
			t.Errorf("verdict %+v beside the error %v", v, err)
		}
		return
	}
	if len(v.Spans) > 0 && (!spans || !v.Flagged) {
		t.Fatalf("spans %v in a verdict flagged %v, of a contract with spans %v", v.Spans, v.Flagged, spans)
	}
	for _, sp := range v.Spans {
		if sp[0] < 0 || sp[0] >= sp[1] || sp[1] > len(text) {
			t.Fatalf("span %v of a %d-byte text", sp, len(text))
		}
	}
}

// FuzzPresidio: any answer about any text is an error or a verdict whose
// spans are within the text.
func FuzzPresidio(f *testing.F) {
	p := fuzzService(f, "presidio").(*presidio)
	f.Add("Grüße zebra-42", []byte(`[{"entity_type":"ZEBRA","start":6,"end":14,"score":0.85}]`))
	f.Add("a\xffb", []byte(`[{"start":1,"end":2},{"start":0,"end":3}]`))
	f.Add("", []byte(`[]`))
	f.Add("x", []byte(`null`))
	f.Fuzz(func(t *testing.T, text string, answer []byte) {
		v, err := p.verdict(text, answer)
		checkVerdict(t, text, v, err, true)
	})
}

// FuzzHTTP: any answer about any text is an error or a verdict whose
// spans are within the text, and only when it is flagged.
func FuzzHTTP(f *testing.F) {
	g := fuzzService(f, "http").(*generic)
	f.Add("Grüße zebra-42", []byte(`{"action":"block","findings":[{"type":"ZEBRA","start":6,"end":14,"score":0.9}]}`))
	f.Add("abc", []byte(`{"action":"modify","findings":[{"start":0,"end":3}],"replacement":"x"}`))
	f.Add("abc", []byte(`{"action":"allow","findings":[{"start":0,"end":9}]}`))
	f.Add("abc", []byte(`{"action":"deny"}`))
	f.Fuzz(func(t *testing.T, text string, answer []byte) {
		v, err := g.verdict(text, answer)
		checkVerdict(t, text, v, err, true)
	})
}

// FuzzModeration: any answer is an error or a verdict without spans.
func FuzzModeration(f *testing.F) {
	m := fuzzService(f, "openai_moderation").(*moderation)
	f.Add([]byte(`{"id":"modr-1","model":"m","results":[{"flagged":true,"categories":{"hate":true},"category_scores":{"hate":0.9}}]}`))
	f.Add([]byte(`{"results":[{"flagged":false},null]}`))
	f.Add([]byte(`{"results":null}`))
	f.Fuzz(func(t *testing.T, answer []byte) {
		v, err := m.verdict(answer)
		checkVerdict(t, "", v, err, false)
	})
}

// FuzzLakera: any answer is an error or a verdict without spans.
func FuzzLakera(f *testing.F) {
	l := fuzzService(f, "lakera").(*lakera)
	f.Add([]byte(`{"flagged":true,"metadata":{"request_uuid":"u"}}`))
	f.Add([]byte(`{"flagged":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, answer []byte) {
		v, err := l.verdict(answer)
		checkVerdict(t, "", v, err, false)
	})
}

// FuzzContentSafety: any answer is an error or a verdict without spans.
func FuzzContentSafety(f *testing.F) {
	cs := fuzzService(f, "azure_content_safety").(*contentSafety)
	f.Add([]byte(`{"blocklistsMatch":[],"categoriesAnalysis":[{"category":"Hate","severity":0},{"category":"Violence","severity":6}]}`))
	f.Add([]byte(`{"categoriesAnalysis":[{"category":"Hate"}]}`))
	f.Add([]byte(`{"categoriesAnalysis":[{"severity":1e99}]}`))
	f.Fuzz(func(t *testing.T, answer []byte) {
		v, err := cs.verdict(answer)
		checkVerdict(t, "", v, err, false)
	})
}

// FuzzPromptShields: any answer, at either phase, is an error or a
// verdict without spans.
func FuzzPromptShields(f *testing.F) {
	ps := fuzzService(f, "azure_prompt_shields").(*promptShields)
	f.Add(false, []byte(`{"userPromptAnalysis":{"attackDetected":true},"documentsAnalysis":[]}`))
	f.Add(true, []byte(`{"userPromptAnalysis":{"attackDetected":false},"documentsAnalysis":[{"attackDetected":true}]}`))
	f.Add(true, []byte(`{"documentsAnalysis":[null]}`))
	f.Fuzz(func(t *testing.T, response bool, answer []byte) {
		phase := guard.Request
		if response {
			phase = guard.Response
		}
		v, err := ps.verdict(phase, answer)
		checkVerdict(t, "", v, err, false)
	})
}
