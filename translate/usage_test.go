package translate

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUsageSane(t *testing.T) {
	const top = MaxUsageCount
	for _, tt := range []struct {
		name    string
		in, out Usage
	}{
		{"believable", Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CachedTokens: 60, CacheWriteTokens: 30,
			CacheWrite1hTokens: 10, ReasoningTokens: 5, AudioSeconds: 1.5, Images: 2, Partial: true},
			Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CachedTokens: 60, CacheWriteTokens: 30,
				CacheWrite1hTokens: 10, ReasoningTokens: 5, AudioSeconds: 1.5, Images: 2, Partial: true}},
		{"zero", Usage{}, Usage{}},
		{"negative", Usage{PromptTokens: -5, CompletionTokens: math.MinInt64, TotalTokens: -1, CachedTokens: -1, CacheWriteTokens: -1,
			CacheWrite1hTokens: -1, ReasoningTokens: -1, AudioSeconds: -3, Images: -1, WebSearchRequests: -1}, Usage{}},
		{"near 2^63", Usage{PromptTokens: 1 << 62, CompletionTokens: math.MaxInt64, TotalTokens: math.MinInt64, CachedTokens: math.MaxInt64,
			CacheWriteTokens: math.MaxInt64, CacheWrite1hTokens: math.MaxInt64, ReasoningTokens: 1 << 62, AudioSeconds: math.MaxFloat64,
			Images: math.MaxInt64},
			Usage{PromptTokens: top, CompletionTokens: top, TotalTokens: 2 * top, CachedTokens: top, ReasoningTokens: top,
				AudioSeconds: MaxAudioSeconds, Images: top}},
		{"at the bounds", Usage{PromptTokens: top, CompletionTokens: top, TotalTokens: 2 * top, AudioSeconds: MaxAudioSeconds, Images: top},
			Usage{PromptTokens: top, CompletionTokens: top, TotalTokens: 2 * top, AudioSeconds: MaxAudioSeconds, Images: top}},
		{"parts over their whole", Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 3, CachedTokens: 8, CacheWriteTokens: 7,
			CacheWrite1hTokens: 9, ReasoningTokens: 6},
			Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, CachedTokens: 8, CacheWriteTokens: 2, CacheWrite1hTokens: 2,
				ReasoningTokens: 5}},
		{"a total over its parts", Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 1000}, Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}},
		{"a total without parts", Usage{TotalTokens: 1000}, Usage{}},
		{"NaN seconds", Usage{AudioSeconds: math.NaN()}, Usage{}},
		{"infinite seconds", Usage{AudioSeconds: math.Inf(1)}, Usage{AudioSeconds: MaxAudioSeconds}},
		{"negative infinite seconds", Usage{AudioSeconds: math.Inf(-1)}, Usage{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.Sane()
			if diff := cmp.Diff(tt.out, got); diff != "" {
				t.Errorf("%+v.Sane() (-want +got):\n%s", tt.in, diff)
			}
			checkSane(t, got)
		})
	}
}

// Any Usage, sane, keeps the invariants every consumer relies on, and is
// its own Sane.
func FuzzUsageSane(f *testing.F) {
	f.Add(int64(100), int64(20), int64(120), int64(60), int64(30), int64(10), int64(5), 1.5, int64(2))
	f.Add(int64(-5), int64(math.MinInt64), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), -3.0, int64(-1))
	f.Add(int64(1<<62), int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64),
		int64(1<<62), math.Inf(1), int64(math.MaxInt64))
	f.Add(int64(10), int64(5), int64(3), int64(8), int64(7), int64(9), int64(6), math.NaN(), int64(0))
	f.Fuzz(func(t *testing.T, prompt, completion, total, cached, write, write1h, reasoning int64, seconds float64, images int64) {
		u := Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: total, CachedTokens: cached,
			CacheWriteTokens: write, CacheWrite1hTokens: write1h, ReasoningTokens: reasoning, AudioSeconds: seconds, Images: images}
		s := u.Sane()
		checkSane(t, s)
		if again := s.Sane(); again != s {
			t.Errorf("Sane of %+v is %+v, not itself", s, again)
		}
		for _, c := range []struct{ in, out int64 }{{prompt, s.PromptTokens}, {completion, s.CompletionTokens}, {images, s.Images}} {
			if c.in >= 0 && c.in <= MaxUsageCount && c.out != c.in {
				t.Errorf("%+v: a believable count %d became %d", u, c.in, c.out)
			}
		}
	})
}

func checkSane(t *testing.T, u Usage) {
	t.Helper()
	for _, n := range []int64{u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.CacheWriteTokens, u.CacheWrite1hTokens,
		u.ReasoningTokens, u.Images} {
		if n < 0 || n > MaxUsageCount {
			t.Fatalf("%+v: a count out of [0, MaxUsageCount]", u)
		}
	}
	switch {
	case u.TotalTokens != u.PromptTokens+u.CompletionTokens:
		t.Fatalf("%+v: total is not prompt + completion", u)
	case u.CachedTokens+u.CacheWriteTokens > u.PromptTokens, u.CacheWrite1hTokens > u.CacheWriteTokens:
		t.Fatalf("%+v: cache reads and writes over the prompt", u)
	case u.ReasoningTokens > u.CompletionTokens:
		t.Fatalf("%+v: reasoning over the completion", u)
	case !(u.AudioSeconds >= 0 && u.AudioSeconds <= MaxAudioSeconds):
		t.Fatalf("%+v: audio seconds out of [0, MaxAudioSeconds]", u)
	}
}
