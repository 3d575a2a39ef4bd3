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
	Currency string `json:"currency"`
	// Models are the prices of public models, each from a date: the keys
	// are pricing.Price's, token prices per million tokens. An amount is a
	// decimal of the currency, as in "2.50" or 2.50, with at most nine
	// decimals; from is a date (2026-06-01, UTC) or an RFC 3339 time, and
	// empty means always.
	Models []pricing.Price `json:"models"`
}

// UnmarshalJSON decodes the prices without pricing.Price's own checks,
// which stop at the first problem: validatePrices reports each one where
// it is instead.
func (p *Prices) UnmarshalJSON(b []byte) error {
	type prices Prices // without this method
	var j struct {
		prices
		Models []priceFields `json:"models"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Prices(j.prices)
	p.Models = nil
	for _, m := range j.Models {
		p.Models = append(p.Models, pricing.Price(m))
	}
	return nil
}

// priceFields is a pricing.Price decoded as its tags say: check has
// written every amount as a string and every from as RFC 3339.
type priceFields pricing.Price

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

// checkInstant takes a price's from, a date or an RFC 3339 time, and
// writes it as RFC 3339 for time.Time to decode; empty is absent
// (always).
func checkInstant(p *problems, at string, v any) any {
	s, ok := v.(string)
	if !ok {
		p.wrongType(at, "want a date (2026-06-01) or an RFC 3339 time, got %s", describe(v))
		return nil
	}
	t, err := pricing.ParseInstant(s)
	if err != nil {
		p.wrongType(at, "%v", err)
		return nil
	}
	if t.IsZero() {
		return nil
	}
	return t.Format(time.RFC3339Nano)
}

// PriceTable is the prices as the gateway uses them.
func (c *Config) PriceTable() (*pricing.Table, error) {
	return pricing.NewTable(c.Prices.Models)
}

// validatePrices checks what PriceTable needs: known models, and one
// price a model from each date.
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
		if p.dropped(at + ".from") {
			continue // not a time, reported
		}
		k := start{m.Model, m.From.UTC()}
		if seen[k] {
			p.add(at, "%s has another price from the same time", m.Model)
		}
		seen[k] = true
	}
}
