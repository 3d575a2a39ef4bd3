package pricing

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// ParseInstant reads a price's From, or any instant the admin takes: a
// date (midnight UTC), or an RFC 3339 time; empty is the zero time.
func ParseInstant(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		return d, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a date (2026-06-01) or an RFC 3339 time", s)
	}
	return t, nil
}

// MarshalText writes the amount as String does, for JSON strings.
func (n Nanos) MarshalText() ([]byte, error) { return []byte(n.String()), nil }

// UnmarshalText reads an amount as ParseAmount does.
func (n *Nanos) UnmarshalText(b []byte) error {
	v, err := ParseAmount(string(b))
	if err != nil {
		return err
	}
	*n = v
	return nil
}

// priceJSON is a Price as the admin API and the stores write it: amounts
// as decimal strings, From as RFC 3339 (null for always).
type priceJSON struct {
	Model       string     `json:"model"`
	From        *time.Time `json:"from"`
	Input       Nanos      `json:"input"`
	CachedInput *Nanos     `json:"cached_input"`
	// CacheWriteInput and CacheWrite1hInput are left out when unset, so
	// that stores written before they existed read back the same.
	CacheWriteInput   *Nanos      `json:"cache_write_input,omitempty"`
	CacheWrite1hInput *Nanos      `json:"cache_write_1h_input,omitempty"`
	Output            Nanos       `json:"output"`
	Reasoning         *Nanos      `json:"reasoning"`
	AudioSecond       Nanos       `json:"audio_second"`
	Images            []imageJSON `json:"images"`
	// WebSearch is left out when zero, as stores written before it
	// existed have it.
	WebSearch Nanos `json:"web_search,omitempty"`
}

type imageJSON struct {
	Size    string `json:"size"`
	Quality string `json:"quality"`
	Each    Nanos  `json:"each"`
}

// MarshalJSON writes the price with its amounts as exact decimal strings.
func (p Price) MarshalJSON() ([]byte, error) {
	j := priceJSON{Model: p.Model, Input: p.Input, CachedInput: p.CachedInput, CacheWriteInput: p.CacheWriteInput,
		CacheWrite1hInput: p.CacheWrite1hInput, Output: p.Output,
		Reasoning: p.Reasoning, AudioSecond: p.AudioSecond, Images: []imageJSON{}, WebSearch: p.WebSearch}
	if !p.From.IsZero() {
		from := p.From.UTC()
		j.From = &from
	}
	for _, img := range p.Images {
		j.Images = append(j.Images, imageJSON(img))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes; from may also be a date,
// and members left out are zero (free), or nil for cached_input and
// reasoning (as input and output). It checks the price as NewTable does.
func (p *Price) UnmarshalJSON(b []byte) error {
	var j struct {
		priceJSON
		From *string `json:"from"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt amount must not read as free
	if err := dec.Decode(&j); err != nil {
		return err
	}
	out := Price{Model: j.Model, Input: j.Input, CachedInput: j.CachedInput, CacheWriteInput: j.CacheWriteInput,
		CacheWrite1hInput: j.CacheWrite1hInput, Output: j.Output,
		Reasoning: j.Reasoning, AudioSecond: j.AudioSecond, WebSearch: j.WebSearch}
	if j.From != nil {
		from, err := ParseInstant(*j.From)
		if err != nil {
			return fmt.Errorf("from: %w", err)
		}
		out.From = from.UTC()
	}
	for _, img := range j.Images {
		out.Images = append(out.Images, ImagePrice(img))
	}
	if out.Model == "" {
		return fmt.Errorf("a price needs a model")
	}
	if err := out.check(); err != nil {
		return err
	}
	*p = out
	return nil
}

// Prices returns the table's prices, by model and then From.
func (t *Table) Prices() []Price {
	if t == nil {
		return nil
	}
	var out []Price
	for _, ps := range t.byModel {
		out = append(out, ps...)
	}
	slices.SortFunc(out, func(a, b Price) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), a.From.Compare(b.From))
	})
	return out
}

// Overlay returns base with over's prices added, each replacing a price of
// base of the same model and From: prices set by an operator at run time
// over those of the config file.
func Overlay(base, over []Price) []Price {
	out := slices.Clone(base)
	for _, p := range over {
		i := slices.IndexFunc(out, func(q Price) bool { return q.Model == p.Model && q.From.Equal(p.From) })
		if i >= 0 {
			out[i] = p
		} else {
			out = append(out, p)
		}
	}
	return out
}
