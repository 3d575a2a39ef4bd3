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

// fields is a Price's members without its JSON methods: encoding/json
// reads and writes them as their tags say.
type fields Price

// MarshalJSON writes the price as its tags say, From as RFC 3339 in UTC
// (null for always) and Images as a list.
func (p Price) MarshalJSON() ([]byte, error) {
	// Model and From come first, as they always have: encoding/json
	// writes the members in the order of their fields.
	j := struct {
		Model string     `json:"model"`
		From  *time.Time `json:"from"`
		fields
	}{Model: p.Model, fields: fields(p)}
	if !p.From.IsZero() {
		from := p.From.UTC()
		j.From = &from
	}
	if j.Images == nil {
		j.Images = []ImagePrice{}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes; from may also be a date,
// and members left out are zero (free), or nil for cached_input and
// reasoning (as input and output). It checks the price as NewTable does.
func (p *Price) UnmarshalJSON(b []byte) error {
	var j struct {
		fields
		From *string `json:"from"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt amount must not read as free
	if err := dec.Decode(&j); err != nil {
		return err
	}
	out := Price(j.fields) // its From, shadowed by j.From, is zero
	if j.From != nil {
		from, err := ParseInstant(*j.From)
		if err != nil {
			return fmt.Errorf("from: %w", err)
		}
		out.From = from.UTC()
	}
	if len(out.Images) == 0 {
		out.Images = nil // [] and none are the same price
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
