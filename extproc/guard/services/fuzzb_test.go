package services

import (
	"testing"
)

// A Bedrock answer never panics the parser, and its spans are in the
// text, sorted and disjoint, only on a flagged verdict.
func FuzzParseBedrock(f *testing.F) {
	f.Add([]byte(`{"action":"NONE","outputs":[],"assessments":[{}]}`), "hello")
	f.Add([]byte(`{"action":"GUARDRAIL_INTERVENED","assessments":[{"sensitiveInformationPolicy":{"regexes":[{"match":"zebra-1","action":"ANONYMIZED"}]}}]}`), "a zebra-1 b zebra-1")
	f.Add([]byte(`{"action":"GUARDRAIL_INTERVENED","assessments":[null,{"wordPolicy":{"customWords":[{"match":"aa"},{"match":"a"}]}}]}`), "aaaa")
	f.Add([]byte(`null`), "")
	f.Add([]byte(`{"action":`), "x")
	f.Fuzz(func(t *testing.T, body []byte, text string) {
		v, err := parseBedrock("svc", body, text)
		if err != nil && (v.Flagged || v.Spans != nil) {
			t.Fatalf("an error with a verdict %+v", v)
		}
		if !v.Flagged && v.Spans != nil {
			t.Fatalf("spans %v without a flag", v.Spans)
		}
		end := 0
		for i, s := range v.Spans {
			if s[0] < end || (i > 0 && s[0] == end) || s[1] <= s[0] || s[1] > len(text) {
				t.Fatalf("spans %v of a %d-byte text", v.Spans, len(text))
			}
			end = s[1]
		}
	})
}

// A Model Armor answer never panics the parser; an error is no verdict.
func FuzzParseModelArmor(f *testing.F) {
	f.Add([]byte(`{"sanitizationResult":{"filterMatchState":"MATCH_FOUND","invocationResult":"SUCCESS"}}`))
	f.Add([]byte(`{"sanitizationResult":{"filterMatchState":"NO_MATCH_FOUND","invocationResult":"PARTIAL"}}`))
	f.Add([]byte(`{"sanitizationResult":null}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if v, err := parseModelArmor("svc", body); v.Spans != nil || (err != nil && v.Flagged) {
			t.Fatalf("verdict %+v, %v", v, err)
		}
	})
}

// A chat completion never panics the judge's parser; an error is no
// verdict.
func FuzzParseJudge(f *testing.F) {
	f.Add([]byte(`{"choices":[{"message":{"content":"safe"}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"content":"unsafe\nS1,S9"}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"content":null}}]}`))
	f.Add([]byte(`{"choices":[null]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if v, err := parseJudge("svc", body); v.Spans != nil || (err != nil && v.Flagged) {
			t.Fatalf("verdict %+v, %v", v, err)
		}
	})
}
