package api

import (
	"encoding/json"
	"math"
	"testing"
)

// AppendJSON writes what json.Marshal writes, for any counts.
func FuzzUsageAppendJSON(f *testing.F) {
	f.Add(int64(12), int64(5), int64(17), int64(0), int64(0), int64(3), int64(0), int64(0), int64(0))
	f.Add(int64(math.MaxInt64), int64(math.MinInt64), int64(-1), int64(1), int64(2), int64(3), int64(4), int64(5), int64(6))
	f.Fuzz(func(t *testing.T, p, c, tot, cached, pa, r, ca, acc, rej int64) {
		u := Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: tot,
			PromptTokensDetails:     PromptTokensDetails{CachedTokens: cached, AudioTokens: pa},
			CompletionTokensDetails: CompletionTokensDetails{ReasoningTokens: r, AudioTokens: ca, AcceptedPredictionTokens: acc, RejectedPredictionTokens: rej}}
		want, err := json.Marshal(&u)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("AppendJSON = %s\njson.Marshal = %s", got, want)
		}
	})
}

// ParseUsage reads what encoding/json reads, and fails where it fails,
// whichever way the usage is written.
func FuzzParseUsage(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":8,"completion_tokens":377,"total_tokens":385,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":320,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
		`{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3,"prompt_tokens_details":null}`,
		`{"Prompt_Tokens":1,"prompt_tokens":2}`, `{"prompt_tokens":1.5}`, `{"prompt_tokens":"3"}`, `{"prompt_tokens":1e2}`,
		`{"prompt_tokens_details":[]}`, `{"completion_tokens_details":{"cached_tokens":4}}`, `{"x":{"y":[1,2]},"total_tokens":-4}`,
		`{"prompt_tokens":99999999999999999999}`, `{"prompt\u005ftokens":3}`, `null`, `[]`, `{"prompt_tokens":1,}`,
		`{"queue_time":0.1,"prompt_tokens":5}`, ` {"total_tokens" : 7 } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want Usage
		wantErr := json.Unmarshal(raw, &want)
		got, err := ParseUsage(raw)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("ParseUsage(%s) error %v, encoding/json %v", raw, err, wantErr)
		}
		if err == nil && *got != want {
			t.Fatalf("ParseUsage(%s) = %+v, encoding/json %+v", raw, *got, want)
		}
	})
}

// OpenAI's usage, as a buffered answer carries it.
func BenchmarkParseUsage(b *testing.B) {
	raw := []byte(`{"prompt_tokens":98,"completion_tokens":54,"total_tokens":152,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := ParseUsage(raw); err != nil {
			b.Fatal(err)
		}
	}
}
