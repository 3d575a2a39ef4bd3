// Package pricing holds what models cost and computes what a request
// cost. The gateway has no prices of its own (providers change them):
// operators set them, each from a date, and a request of a model without
// a price in effect has an unknown cost rather than a wrong one.
//
// Money is counted in Nanos, billionths of the table's currency unit, in
// integers: sums of many small costs stay exact, and budgets compare
// them without rounding.
package pricing

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Nanos is an amount of money in billionths of the currency unit.
type Nanos int64

// NanosPerUnit is one currency unit (a dollar, a euro) in Nanos.
const NanosPerUnit = 1_000_000_000

// ParseAmount reads a decimal amount of the currency unit ("2.50",
// "0.000125", "3") exactly, with at most nine decimals: what a price
// table says, never a float's approximation of it. Negative amounts,
// exponents and signs are refused.
func ParseAmount(s string) (Nanos, error) {
	whole, frac, dotted := strings.Cut(s, ".")
	if whole == "" || dotted && frac == "" {
		return 0, fmt.Errorf("amount %q: want digits, as in 2.50", s)
	}
	if len(frac) > 9 {
		return 0, fmt.Errorf("amount %q: at most 9 decimals", s)
	}
	var n uint64
	for _, part := range []string{whole, frac + strings.Repeat("0", 9-len(frac))} {
		for i := 0; i < len(part); i++ {
			c := part[i]
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("amount %q: want digits, as in 2.50", s)
			}
			hi, lo := bits.Mul64(n, 10)
			if lo += uint64(c - '0'); hi != 0 || lo < uint64(c-'0') || lo > math.MaxInt64 {
				return 0, fmt.Errorf("amount %q is too large", s)
			}
			n = lo
		}
	}
	return Nanos(n), nil
}

// String writes the amount as ParseAmount reads it, without trailing
// zeros beyond two decimals: 2500000000 is "2.50", 125000 "0.000125".
func (n Nanos) String() string {
	var b [32]byte
	out := b[:0]
	u := uint64(n)
	if n < 0 {
		out, u = append(out, '-'), uint64(-n) // -MinInt64 wraps to itself, which uint64 reads right
	}
	out = strconv.AppendUint(out, u/NanosPerUnit, 10)
	out = append(out, '.')
	var frac [9]byte
	for i, f := 8, u%NanosPerUnit; i >= 0; i, f = i-1, f/10 {
		frac[i] = byte('0' + f%10)
	}
	digits := 9
	for digits > 2 && frac[digits-1] == '0' {
		digits--
	}
	return string(append(out, frac[:digits]...))
}

// Price is what one model costs from a date. Token prices are per
// million tokens; zero means free, not unknown (a model without a Price
// has an unknown cost).
//
// It is the one price type: the config file's prices, the admin API's and
// the stores' (a JSON column) are all this struct, written as its tags
// say, amounts as decimal strings ("2.50"). A new member is a field here,
// with its tag, and its place in Cost and check.
type Price struct {
	Model string `json:"model"`
	// From is when the price takes effect; zero means always. It is
	// written as RFC 3339 in UTC, null for always, and read as that or a
	// date (2026-06-01, UTC).
	From time.Time `json:"from"`
	// Input is the price of prompt tokens, and of embedded tokens.
	Input Nanos `json:"input"`
	// CachedInput is the price of prompt tokens read from the provider's
	// cache; nil means Input.
	CachedInput *Nanos `json:"cached_input"`
	// CacheWriteInput is the price of prompt tokens written to the
	// provider's cache (Anthropic and Bedrock charge 1.25× input for 5
	// minutes); nil means Input. Left out when nil, as in stores written
	// before it existed.
	CacheWriteInput *Nanos `json:"cache_write_input,omitempty"`
	// CacheWrite1hInput is the price of cache writes that live for an
	// hour (2× input at Anthropic and Bedrock); nil means
	// CacheWriteInput's. Left out when nil.
	CacheWrite1hInput *Nanos `json:"cache_write_1h_input,omitempty"`
	// Output is the price of generated tokens.
	Output Nanos `json:"output"`
	// Reasoning is the price of reasoning tokens, which providers count
	// among the generated ones; nil means Output.
	Reasoning *Nanos `json:"reasoning"`
	// AudioSecond is the price of a second of transcribed audio.
	AudioSecond Nanos `json:"audio_second"`
	// Images are the prices of one generated image by size and quality,
	// written [] when there are none.
	Images []ImagePrice `json:"images"`
	// WebSearch is the price of one web search the provider ran for the
	// answer, which it bills apart from tokens (Anthropic's $10 per 1,000
	// searches is 0.01; for Gemini 2.5 and older, which bill per grounded
	// prompt, the price of one). Left out when zero, as in stores written
	// before it existed.
	WebSearch Nanos `json:"web_search,omitempty"`
}

// ImagePrice is the price of one image of a size and quality; an empty
// Size or Quality matches any.
type ImagePrice struct {
	Size    string `json:"size"`
	Quality string `json:"quality"`
	Each    Nanos  `json:"each"`
}

// Usage is what a request consumed, as the ledger records it.
type Usage struct {
	PromptTokens       int64
	CachedTokens       int64 // of the prompt tokens
	CacheWriteTokens   int64 // of the prompt tokens
	CacheWrite1hTokens int64 // of the cache writes
	CompletionTokens   int64
	ReasoningTokens    int64 // of the completion tokens
	AudioSeconds       float64
	Images             int64
	ImageSize          string
	ImageQuality       string
	WebSearchRequests  int64
}

// Table is the prices in effect over time, by model.
type Table struct {
	byModel map[string][]Price // each model's, by From
}

// NewTable checks prices and returns their table: each model has at most
// one price from each date, and no amount is negative.
func NewTable(prices []Price) (*Table, error) {
	t := &Table{byModel: map[string][]Price{}}
	var errs []error
	for i, p := range prices {
		if err := p.check(); err != nil {
			errs = append(errs, fmt.Errorf("price %d (%s): %w", i, p.Model, err))
			continue
		}
		t.byModel[p.Model] = append(t.byModel[p.Model], p)
	}
	for model, ps := range t.byModel {
		slices.SortStableFunc(ps, func(a, b Price) int { return a.From.Compare(b.From) })
		for i := 1; i < len(ps); i++ {
			if ps[i].From.Equal(ps[i-1].From) {
				errs = append(errs, fmt.Errorf("model %s has two prices from %s", model, ps[i].From.Format(time.DateOnly)))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

func (p Price) check() error {
	if p.Model == "" {
		return errors.New("no model")
	}
	amounts := []Nanos{p.Input, p.Output, p.AudioSecond, p.WebSearch}
	for _, o := range []*Nanos{p.CachedInput, p.CacheWriteInput, p.CacheWrite1hInput, p.Reasoning} {
		if o != nil {
			amounts = append(amounts, *o)
		}
	}
	for _, img := range p.Images {
		amounts = append(amounts, img.Each)
	}
	if slices.ContainsFunc(amounts, func(n Nanos) bool { return n < 0 }) {
		return errors.New("a negative amount")
	}
	return nil
}

// At returns the price of model in effect at t: the latest one from t or
// before. A nil Table has no prices.
func (t *Table) At(model string, at time.Time) (Price, bool) {
	if t == nil {
		return Price{}, false
	}
	ps := t.byModel[model]
	i, _ := slices.BinarySearchFunc(ps, at, func(p Price, at time.Time) int {
		if p.From.After(at) {
			return 1
		}
		return -1
	})
	if i == 0 {
		return Price{}, false
	}
	return ps[i-1], true
}

// Cost is what u costs at price p: prompt tokens at the input price
// (cached ones at the cached price, those written to the cache at the
// cache write price, or its hour's for an hour), completion tokens at the output price
// (reasoning ones at the reasoning price), audio by the second, images
// and web searches each. known is false for an image whose size and quality p has no
// price for: the cost is then unknown, not the rest alone.
func (p Price) Cost(u Usage) (cost Nanos, known bool) {
	cached := min(max(u.CachedTokens, 0), max(u.PromptTokens, 0))
	written := min(max(u.CacheWriteTokens, 0), max(u.PromptTokens, 0)-cached)
	hour := min(max(u.CacheWrite1hTokens, 0), written)
	reasoning := min(max(u.ReasoningTokens, 0), max(u.CompletionTokens, 0))
	write := or(p.CacheWriteInput, p.Input)
	var sum acc
	sum.tokens(u.PromptTokens-cached-written, p.Input)
	sum.tokens(cached, or(p.CachedInput, p.Input))
	sum.tokens(written-hour, write)
	sum.tokens(hour, or(p.CacheWrite1hInput, write))
	sum.tokens(u.CompletionTokens-reasoning, p.Output)
	sum.tokens(reasoning, or(p.Reasoning, p.Output))
	sum.seconds(u.AudioSeconds, p.AudioSecond)
	if u.Images > 0 {
		each, ok := p.image(u.ImageSize, u.ImageQuality)
		if !ok {
			return 0, false
		}
		sum.times(u.Images, each)
	}
	sum.times(u.WebSearchRequests, p.WebSearch)
	return sum.n, true
}

func (p Price) image(size, quality string) (Nanos, bool) {
	best := -1 // how specific the price found is; -1: none yet
	var each Nanos
	for _, img := range p.Images {
		if img.Size != "" && img.Size != size || img.Quality != "" && img.Quality != quality {
			continue
		}
		// The most specific price wins: size and quality over either.
		specific := 0
		if img.Size != "" {
			specific++
		}
		if img.Quality != "" {
			specific++
		}
		if specific > best {
			best, each = specific, img.Each
		}
	}
	return each, best >= 0
}

func or(p *Nanos, dflt Nanos) Nanos {
	if p != nil {
		return *p
	}
	return dflt
}

// acc sums Nanos, saturating at the largest amount rather than wrapping.
type acc struct{ n Nanos }

// tokens adds n tokens at perMillion, rounded to the nearest nano; n < 1
// adds nothing.
func (a *acc) tokens(n int64, perMillion Nanos) {
	if n <= 0 || perMillion <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(n), uint64(perMillion))
	lo, carry := bits.Add64(lo, 500_000, 0) // round half up
	hi += carry
	if hi >= 1_000_000 { // the quotient would not fit in 64 bits
		a.add(math.MaxUint64)
		return
	}
	q, _ := bits.Div64(hi, lo, 1_000_000)
	a.add(q)
}

// seconds adds s seconds at perSecond. Providers bill audio by the
// second or finer; the price of a fraction is rounded to the nano. Seconds
// that are NaN or not above zero add nothing, and infinite ones at a
// price the most there is (free stays free).
func (a *acc) seconds(s float64, perSecond Nanos) {
	if !(s > 0) || perSecond <= 0 {
		return
	}
	if f := math.Round(s * float64(perSecond)); f < math.MaxInt64 {
		a.add(uint64(f))
	} else {
		a.add(math.MaxUint64)
	}
}

// times adds n items at each; n < 1 or a negative price adds nothing.
func (a *acc) times(n int64, each Nanos) {
	if n <= 0 || each <= 0 {
		return
	}
	if hi, lo := bits.Mul64(uint64(n), uint64(each)); hi == 0 {
		a.add(lo)
	} else {
		a.add(math.MaxUint64)
	}
}

func (a *acc) add(v uint64) {
	if v > uint64(math.MaxInt64-a.n) {
		a.n = math.MaxInt64
		return
	}
	a.n += Nanos(v)
}
