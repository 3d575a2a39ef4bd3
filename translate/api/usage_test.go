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
