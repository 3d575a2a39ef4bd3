package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"modelgate/authz/pricing"
)

func TestPrices(t *testing.T) {
	cfg, err := Parse([]byte(valid + `
prices:
  models:
    - model: gpt-4o
      input: 2.50             # a YAML number, read as the decimal written
      cached_input: "1.25"
      cache_write_input: "3.125"
      cache_write_1h_input: "5"
      web_search: "0.01"
      output: "10"
      audio_second: 1.25e-07  # an exponent, written out
      images:
        - {size: 1024x1024, each: "0.04"}
    - {model: gpt-4o, from: 2026-06-01, input: "2.00", output: "8.00"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Prices.Currency != "USD" {
		t.Errorf("currency %q, want the default USD", cfg.Prices.Currency)
	}
	table, err := cfg.PriceTable()
	if err != nil {
		t.Fatal(err)
	}
	before, ok := table.At("gpt-4o", time.Date(2026, 5, 31, 23, 0, 0, 0, time.UTC))
	if !ok || before.Input != 2_500_000_000 || before.CachedInput == nil || *before.CachedInput != 1_250_000_000 ||
		before.CacheWriteInput == nil || *before.CacheWriteInput != 3_125_000_000 ||
		before.CacheWrite1hInput == nil || *before.CacheWrite1hInput != 5*pricing.NanosPerUnit ||
		before.Output != 10*pricing.NanosPerUnit || before.AudioSecond != 125 || len(before.Images) != 1 || before.Images[0].Each != 40_000_000 ||
		before.WebSearch != 10_000_000 {
		t.Errorf("the price before June: %+v (found %v)", before, ok)
	}
	after, ok := table.At("gpt-4o", time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	if !ok || after.Input != 2*pricing.NanosPerUnit || after.CachedInput != nil || after.CacheWriteInput != nil || after.CacheWrite1hInput != nil ||
		after.WebSearch != 0 {
		t.Errorf("the price from June: %+v (found %v)", after, ok)
	}
}

// Every member of a price in the config file reaches the gateway's
// price: a config price with every key set gives a pricing.Price with no
// field left zero, so a field pricing.Price gains and the config lacks
// (or PriceTable drops) fails here.
func TestPricesCarryEveryField(t *testing.T) {
	var keys []string
	mt := reflect.TypeFor[pricing.Price]()
	for i := range mt.NumField() {
		f := mt.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch f.Type {
		case reflect.TypeFor[pricing.Nanos](), reflect.TypeFor[*pricing.Nanos]():
			keys = append(keys, fmt.Sprintf("%s: \"0.%02d\"", key, i+1))
		case reflect.TypeFor[[]pricing.ImagePrice]():
			keys = append(keys, key+": [{size: 1024x1024, quality: hd, each: \"0.04\"}]")
		case reflect.TypeFor[string](), reflect.TypeFor[time.Time]():
			keys = append(keys, map[string]string{"model": "model: gpt-4o", "from": "from: 2026-06-01"}[key])
		default:
			t.Fatalf("pricing.Price.%s: a field of a type this test does not know", f.Name)
		}
	}
	cfg, err := Parse([]byte(valid + "prices:\n  models:\n    - {" + strings.Join(keys, ", ") + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	table, err := cfg.PriceTable()
	if err != nil {
		t.Fatal(err)
	}
	p, ok := table.At("gpt-4o", time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	v := reflect.ValueOf(p)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("pricing.Price.%s is not set by the config's price {%s} (found %v)", v.Type().Field(i).Name, strings.Join(keys, ", "), ok)
		}
	}
}

func TestPricesProblems(t *testing.T) {
	_, err := Parse([]byte(valid + `
prices:
  models:
    - {model: gpt-4o, input: "-1"}
    - {model: gpt-5, input: "1"}
    - {model: gpt-4o, from: yesterday, input: "1"}
    - {model: gpt-4o, output: [1]}
    - {model: gpt-4o, input: "0.0000000001"}
    - {input: "1"}
    - {model: gpt-4o, from: 2026-06-01}
    - {model: gpt-4o, from: "2026-06-01T00:00:00Z"}
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`prices.models[0].input: amount "-1": want digits`,
		`prices.models[1].model: "gpt-5" is not a model of this config`,
		`prices.models[2].from: "yesterday" is not a date`,
		`prices.models[3].output: want an amount such as "2.50", got a list`,
		`prices.models[4].input: amount "0.0000000001": at most 9 decimals`,
		`prices.models[5].model: is required`,
		`prices.models[7]: gpt-4o has another price from the same time`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
