package pricing

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseAmount(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Nanos
		err  string
	}{
		{"2.50", 2_500_000_000, ""},
		{"0.000125", 125_000, ""},
		{"3", 3 * NanosPerUnit, ""},
		{"0.000000001", 1, ""},
		{"9223372036.854775807", math.MaxInt64, ""},
		{"9223372036.854775808", 0, "too large"},
		{"100000000000000000000", 0, "too large"},
		{"0.0000000001", 0, "at most 9 decimals"},
		{"", 0, "want digits"},
		{".5", 0, "want digits"},
		{"1.", 0, "want digits"},
		{"-1", 0, "want digits"},
		{"+1", 0, "want digits"},
		{"1e3", 0, "want digits"},
		{"1,5", 0, "want digits"},
		{" 1", 0, "want digits"},
	} {
		got, err := ParseAmount(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("ParseAmount(%q) = %d, %v; want %d", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseAmount(%q) = %d, %v; want an error with %q", c.in, got, err, c.err)
		}
	}
}

func TestNanosString(t *testing.T) {
	for n, want := range map[Nanos]string{
		2_500_000_000: "2.50", 125_000: "0.000125", 0: "0.00", 3 * NanosPerUnit: "3.00", 1: "0.000000001",
		-1_500_000_000: "-1.50", math.MinInt64: "-9223372036.854775808",
	} {
		if got := n.String(); got != want {
			t.Errorf("Nanos(%d) = %q, want %q", int64(n), got, want)
		}
	}
}

// Whatever ParseAmount accepts, String writes so that it reads back the
// same.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"2.50", "0.000125", "3", "9223372036.854775807", "1.", "-1", "0.0000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseAmount(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseAmount(%q) = %d, negative", s, n)
		}
		back, err := ParseAmount(n.String())
		if err != nil || back != n {
			t.Fatalf("ParseAmount(%q) = %d, written %q, read back %d, %v", s, n, n.String(), back, err)
		}
	})
}

func amount(t *testing.T, s string) Nanos {
	t.Helper()
	n, err := ParseAmount(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTableAt(t *testing.T) {
	day := func(s string) time.Time {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	table, err := NewTable([]Price{
		{Model: "gpt-4o", From: day("2026-06-01"), Input: amount(t, "2.00")},
		{Model: "gpt-4o", Input: amount(t, "5.00")}, // always, until June
		{Model: "gpt-4o", From: day("2026-09-01"), Input: amount(t, "1.50")},
		{Model: "mini", From: day("2026-06-01"), Input: amount(t, "0.15")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model string
		at    string
		want  string // "" for no price
	}{
		{"gpt-4o", "2025-01-01", "5.00"},
		{"gpt-4o", "2026-05-31", "5.00"},
		{"gpt-4o", "2026-06-01", "2.00"},
		{"gpt-4o", "2026-08-31", "2.00"},
		{"gpt-4o", "2026-09-01", "1.50"},
		{"gpt-4o", "2030-01-01", "1.50"},
		{"mini", "2026-05-31", ""}, // before its first price: unknown
		{"mini", "2026-06-02", "0.15"},
		{"other", "2026-06-02", ""},
	} {
		p, ok := table.At(c.model, day(c.at))
		got := ""
		if ok {
			got = p.Input.String()
		}
		if got != c.want {
			t.Errorf("%s at %s: input %q (found %v), want %q", c.model, c.at, got, ok, c.want)
		}
	}
}

func TestNewTableRefuses(t *testing.T) {
	neg := Nanos(-1)
	for name, prices := range map[string][]Price{
		"two prices from one date":      {{Model: "m", Input: 1}, {Model: "m", Input: 2}},
		"a negative input":              {{Model: "m", Input: -1}},
		"a negative cached price":       {{Model: "m", CachedInput: &neg}},
		"a negative write price":        {{Model: "m", CacheWriteInput: &neg}},
		"a negative hour's write price": {{Model: "m", CacheWrite1hInput: &neg}},
		"a negative web search price":   {{Model: "m", WebSearch: -1}},
		"a negative image price":        {{Model: "m", Images: []ImagePrice{{Each: -5}}}},
		"no model":                      {{Input: 1}},
	} {
		if _, err := NewTable(prices); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCost(t *testing.T) {
	cachedPrice, reasoningPrice, writePrice, hourPrice := amount(t, "1.25"), amount(t, "20"), amount(t, "3.125"), amount(t, "5")
	gpt := Price{Model: "gpt", Input: amount(t, "2.50"), Output: amount(t, "10"), AudioSecond: amount(t, "0.0001"),
		Images: []ImagePrice{{Each: amount(t, "0.04")}, {Size: "1024x1792", Each: amount(t, "0.08")},
			{Size: "1024x1792", Quality: "hd", Each: amount(t, "0.12")}}}
	withOwn := gpt
	withOwn.CachedInput, withOwn.Reasoning, withOwn.CacheWriteInput = &cachedPrice, &reasoningPrice, &writePrice
	withHour := withOwn
	withHour.CacheWrite1hInput = &hourPrice
	for _, c := range []struct {
		name  string
		price Price
		usage Usage
		want  string // "" for unknown
	}{
		// 1,000 prompt tokens at 2.50 a million and 500 completion at 10.
		{"tokens", gpt, Usage{PromptTokens: 1000, CompletionTokens: 500}, "0.0075"},
		// Cached tokens at the input price when the price has none of its own.
		{"cached, no cached price", gpt, Usage{PromptTokens: 1000, CachedTokens: 400}, "0.0025"},
		// 600 at 2.50 and 400 at 1.25 a million.
		{"cached at its own price", withOwn, Usage{PromptTokens: 1000, CachedTokens: 400}, "0.002"},
		// 400 at 2.50, 200 cached at 1.25 and 400 written at 3.125 a million.
		{"cache writes at their own price", withOwn, Usage{PromptTokens: 1000, CachedTokens: 200, CacheWriteTokens: 400}, "0.0025"},
		{"cache writes at the input price", gpt, Usage{PromptTokens: 1000, CacheWriteTokens: 400}, "0.0025"},
		// 400 at 2.50, 200 cached at 1.25, 100 written at 3.125 and 300 for an hour at 5 a million.
		{"hour-long cache writes at their own price", withHour, Usage{PromptTokens: 1000, CachedTokens: 200, CacheWriteTokens: 400, CacheWrite1hTokens: 300}, "0.0030625"},
		{"hour-long cache writes at the write price", withOwn, Usage{PromptTokens: 1000, CachedTokens: 200, CacheWriteTokens: 400, CacheWrite1hTokens: 300}, "0.0025"},
		// More hour-long writes than writes charges no more than the writes.
		{"hour-long writes beyond the writes", withHour, Usage{PromptTokens: 1000, CacheWriteTokens: 100, CacheWrite1hTokens: 400}, "0.00275"},
		// More written than the prompt left after the cached tokens charges no negative tokens.
		{"writes beyond the prompt", withOwn, Usage{PromptTokens: 100, CachedTokens: 60, CacheWriteTokens: 500}, "0.0002"},
		// 300 at 10 and 200 reasoning at 20 a million.
		{"reasoning at its own price", withOwn, Usage{CompletionTokens: 500, ReasoningTokens: 200}, "0.007"},
		{"reasoning at the output price", gpt, Usage{CompletionTokens: 500, ReasoningTokens: 200}, "0.005"},
		// More cached than prompt tokens (a provider's odd report) charges no negative tokens.
		{"cached beyond the prompt", withOwn, Usage{PromptTokens: 100, CachedTokens: 500}, "0.000125"},
		{"one token", gpt, Usage{PromptTokens: 1}, "0.0000025"},
		// One token at 0.0025 a million is 2.5 nanos, rounded half up.
		{"a fraction of a nano", Price{Model: "m", Input: amount(t, "0.0025")}, Usage{PromptTokens: 1}, "0.000000003"},
		{"audio", gpt, Usage{AudioSeconds: 61.5}, "0.00615"},
		{"an image of any size", gpt, Usage{Images: 2, ImageSize: "1024x1024", ImageQuality: "standard"}, "0.08"},
		{"the size's price", gpt, Usage{Images: 1, ImageSize: "1024x1792", ImageQuality: "standard"}, "0.08"},
		{"size and quality's price", gpt, Usage{Images: 1, ImageSize: "1024x1792", ImageQuality: "hd"}, "0.12"},
		{"an image without a price", Price{Model: "m", Images: []ImagePrice{{Size: "256x256", Each: 1}}},
			Usage{PromptTokens: 10, Images: 1, ImageSize: "1024x1024"}, ""},
		// 1,000 prompt tokens at 2.50 a million and 3 searches at 0.01 each.
		{"web searches", Price{Model: "claude", Input: amount(t, "2.50"), WebSearch: amount(t, "0.01")},
			Usage{PromptTokens: 1000, WebSearchRequests: 3}, "0.0325"},
		{"web searches without a price are free", gpt, Usage{PromptTokens: 1000, WebSearchRequests: 3}, "0.0025"},
		{"web searches saturate", Price{Model: "m", WebSearch: math.MaxInt64}, Usage{WebSearchRequests: 2}, "9223372036.854775807"},
		{"free", Price{Model: "local"}, Usage{PromptTokens: 1000, CompletionTokens: 1000}, "0.00"},
		{"saturates", Price{Model: "m", Input: math.MaxInt64}, Usage{PromptTokens: math.MaxInt64}, "9223372036.854775807"},
		// Counts no provider could mean, as they reach Cost unchecked.
		{"negative counts", gpt, Usage{PromptTokens: -1000, CachedTokens: -5, CacheWriteTokens: -5, CompletionTokens: math.MinInt64,
			ReasoningTokens: -1, AudioSeconds: -3, Images: -2, ImageSize: "1024x1792"}, "0.00"},
		{"infinite audio", gpt, Usage{AudioSeconds: math.Inf(1)}, "9223372036.854775807"},
		{"infinite audio for free", Price{Model: "local"}, Usage{AudioSeconds: math.Inf(1)}, "0.00"},
		{"NaN audio", gpt, Usage{AudioSeconds: math.NaN()}, "0.00"},
		{"images beyond counting", gpt, Usage{Images: math.MaxInt64}, "9223372036.854775807"},
		// Amounts NewTable refuses, in a Price made without it.
		{"negative amounts", Price{Model: "m", Input: -1, Output: -1, AudioSecond: -1, Images: []ImagePrice{{Each: -1}}},
			Usage{PromptTokens: 1000, CompletionTokens: 1000, AudioSeconds: 10, Images: 2}, "0.00"},
	} {
		cost, known := c.price.Cost(c.usage)
		got := ""
		if known {
			got = cost.String()
		}
		if got != c.want {
			t.Errorf("%s: cost %q (known %v), want %q", c.name, got, known, c.want)
		}
	}
}

// Cost never panics, is never negative, charges nothing at a price of
// nothing, and costs a request more for more tokens, whatever the counts
// and amounts (negative ones included, as a Price made without NewTable
// may have).
func FuzzCost(f *testing.F) {
	f.Add(int64(1000), int64(200), int64(400), int64(300), int64(500), int64(100), 61.5, int64(2), int64(2_500_000_000), int64(10_000_000_000), int64(100_000))
	f.Add(int64(-1000), int64(-5), int64(-5), int64(-1), int64(math.MinInt64), int64(-1), math.Inf(1), int64(-2), int64(0), int64(0), int64(0))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(0), int64(0), int64(math.MaxInt64), int64(0), math.NaN(), int64(math.MaxInt64),
		int64(math.MaxInt64), int64(-1), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, prompt, cached, write, hour, completion, reasoning int64, seconds float64, images, in, out, each int64) {
		u := Usage{PromptTokens: prompt, CachedTokens: cached, CacheWriteTokens: write, CacheWrite1hTokens: hour,
			CompletionTokens: completion, ReasoningTokens: reasoning, AudioSeconds: seconds, Images: images}
		p := Price{Model: "m", Input: Nanos(in), Output: Nanos(out), AudioSecond: Nanos(each), Images: []ImagePrice{{Each: Nanos(each)}}}
		cost, known := p.Cost(u)
		if !known || cost < 0 {
			t.Fatalf("%+v at %+v: cost %d (known %v)", u, p, cost, known)
		}
		if free, _ := (Price{Model: "m", Images: []ImagePrice{{}}}).Cost(u); free != 0 {
			t.Fatalf("%+v for free: cost %d", u, free)
		}
		more := u
		more.PromptTokens, more.CompletionTokens = max(u.PromptTokens, 0)+1, max(u.CompletionTokens, 0)+1
		if more.PromptTokens > 0 && more.CompletionTokens > 0 {
			if c, _ := p.Cost(more); c < cost {
				t.Fatalf("%+v at %+v: cost %d, less than %d for fewer tokens", more, p, c, cost)
			}
		}
	})
}

// The cost is computed once a request, when its record is written.
func BenchmarkCost(b *testing.B) {
	table, err := NewTable([]Price{{Model: "gpt-4o", Input: 2_500_000_000, Output: 10 * NanosPerUnit}})
	if err != nil {
		b.Fatal(err)
	}
	at := time.Now()
	u := Usage{PromptTokens: 812, CachedTokens: 512, CompletionTokens: 230, ReasoningTokens: 64}
	b.ReportAllocs()
	for b.Loop() {
		p, ok := table.At("gpt-4o", at)
		if c, known := p.Cost(u); !ok || !known || c <= 0 {
			b.Fatal("no cost")
		}
	}
}
