package config

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"time"

	"modelgate/authz/pricing"
)

// Prices are what models cost, for the cost of each request. The
// gateway knows no prices of its own: a model without one here has an
// unknown cost.
type Prices struct {
	// Currency names the unit of every amount; default USD.
	Currency string       `json:"currency"`
	Models   []ModelPrice `json:"models"`
}

// ModelPrice is a public model's price from a date. Token prices are per
// million tokens.
type ModelPrice struct {
	Model string `json:"model"`
	// From is when the price takes effect: a date (2026-06-01, UTC) or
	// an RFC 3339 time; empty means always.
	From string `json:"from"`
	// Input is the price of prompt tokens, and of embedded ones.
	Input Amount `json:"input"`
	// CachedInput is the price of prompt tokens the provider read from its
	// cache; unset means Input.
	CachedInput *Amount `json:"cached_input"`
	// CacheWriteInput is the price of prompt tokens the provider wrote to
	// its cache; unset means Input.
	CacheWriteInput *Amount `json:"cache_write_input"`
	// CacheWrite1hInput is the price of cache writes that live for an
	// hour; unset means CacheWriteInput's.
	CacheWrite1hInput *Amount `json:"cache_write_1h_input"`
	// Output is the price of generated tokens.
	Output Amount `json:"output"`
	// Reasoning is the price of reasoning tokens; unset means Output.
	Reasoning *Amount `json:"reasoning"`
	// AudioSecond is the price of a second of transcribed audio.
	AudioSecond Amount       `json:"audio_second"`
	Images      []ImagePrice `json:"images"`
	// WebSearch is the price of one web search the provider ran for an
	// answer, which it bills apart from tokens (Anthropic's $10 per 1,000
	// searches is "0.01"); unset means free.
	WebSearch Amount `json:"web_search"`
}

// ImagePrice is the price of one generated image of a size and quality;
// an empty size or quality matches any.
type ImagePrice struct {
	Size    string `json:"size"`
	Quality string `json:"quality"`
	Each    Amount `json:"each"`
}

// Amount is a decimal amount of the currency, as in "2.50" or 2.50, with
// at most nine decimals.
type Amount string

// checkAmount takes an amount written as a string or a number: a YAML
// number arrives as JSON's, possibly with an exponent (1.25e-07), which
// is written out as the decimal it is.
func checkAmount(p *problems, at string, v any) any {
	const want = `an amount such as "2.50"`
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case json.Number:
		s = v.String()
		if strings.ContainsAny(s, "eE") {
			r, ok := new(big.Rat).SetString(s)
			if !ok {
				p.wrongType(at, "%q is not %s", s, want)
				return nil
			}
			s = strings.TrimRight(strings.TrimRight(r.FloatString(12), "0"), ".")
		}
	default:
		p.wrongType(at, "want %s, got %s", want, describe(v))
		return nil
	}
	if _, err := pricing.ParseAmount(s); err != nil {
		p.wrongType(at, "%v", err)
		return nil
	}
	return s
}

// nanos is the amount's value; the empty amount is zero. Parse has
// checked every amount.
func (a Amount) nanos() pricing.Nanos {
	if a == "" {
		return 0
	}
	n, _ := pricing.ParseAmount(string(a))
	return n
}

func (a *Amount) nanosOrNil() *pricing.Nanos {
	if a == nil {
		return nil
	}
	n := a.nanos()
	return &n
}

// parseFrom reads a price's From: a date, or an RFC 3339 time.
func parseFrom(s string) (time.Time, error) { return pricing.ParseInstant(s) }

// PriceTable is the prices as the gateway uses them.
func (c *Config) PriceTable() (*pricing.Table, error) {
	prices := make([]pricing.Price, 0, len(c.Prices.Models))
	for _, m := range c.Prices.Models {
		from, err := parseFrom(m.From)
		if err != nil {
			return nil, err
		}
		p := pricing.Price{Model: m.Model, From: from, Input: m.Input.nanos(), CachedInput: m.CachedInput.nanosOrNil(),
			CacheWriteInput: m.CacheWriteInput.nanosOrNil(), CacheWrite1hInput: m.CacheWrite1hInput.nanosOrNil(), Output: m.Output.nanos(),
			Reasoning: m.Reasoning.nanosOrNil(), AudioSecond: m.AudioSecond.nanos(), WebSearch: m.WebSearch.nanos()}
		for _, img := range m.Images {
			p.Images = append(p.Images, pricing.ImagePrice{Size: img.Size, Quality: img.Quality, Each: img.Each.nanos()})
		}
		prices = append(prices, p)
	}
	return pricing.NewTable(prices)
}

// validatePrices checks what PriceTable needs: known models, dates, and
// one price a model from each date.
func (c *Config) validatePrices(p *problems) {
	models := map[string]bool{}
	for _, m := range c.Models {
		models[m.ID] = true
	}
	type start struct {
		model string
		from  time.Time
	}
	seen := map[start]bool{}
	for i, m := range c.Prices.Models {
		at := fmt.Sprintf("prices.models[%d]", i)
		switch {
		case m.Model == "":
			p.add(at+".model", "is required")
		case !models[m.Model]:
			p.add(at+".model", "%q is not a model of this config", m.Model)
		}
		from, err := parseFrom(m.From)
		if err != nil {
			p.add(at+".from", "%v", err)
			continue
		}
		k := start{m.Model, from.UTC()}
		if seen[k] {
			p.add(at, "%s has another price from the same time", m.Model)
		}
		seen[k] = true
	}
}
