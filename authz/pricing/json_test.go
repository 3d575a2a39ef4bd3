package pricing

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPriceJSON(t *testing.T) {
	in := `{"model":"gpt-4o","from":"2026-06-01","input":"2.5","cached_input":"1.25","output":"10","images":[{"size":"1024x1024","quality":"","each":"0.04"}]}`
	var p Price
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	cached := Nanos(1_250_000_000)
	want := Price{Model: "gpt-4o", From: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), Input: 2_500_000_000, CachedInput: &cached,
		Output: 10_000_000_000, Images: []ImagePrice{{Size: "1024x1024", Each: 40_000_000}}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("%s = %+v", in, p)
	}
	out, _ := json.Marshal(p)
	if string(out) != `{"model":"gpt-4o","from":"2026-06-01T00:00:00Z","input":"2.50","cached_input":"1.25","output":"10.00","reasoning":null,"audio_second":"0.00","images":[{"size":"1024x1024","quality":"","each":"0.04"}]}` {
		t.Errorf("marshals as %s", out)
	}
	for body, wantErr := range map[string]string{
		`{"model":"m","ouptut":"1"}`:  `unknown field "ouptut"`,
		`{"model":"m","input":"-1"}`:  "want digits",
		`{"model":"m","input":1.5}`:   "cannot unmarshal number",
		`{"input":"1"}`:               "needs a model",
		`{"model":"m","from":"June"}`: "not a date",
	} {
		var p Price
		if err := json.Unmarshal([]byte(body), &p); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: %v, want an error saying %q", body, err, wantErr)
		}
	}
}

// Every member of a Price is written and read back: a field the JSON
// form lacks would be lost by the admin API and the stores.
func TestPriceJSONCarriesEveryField(t *testing.T) {
	p := everyField(t)
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var again Price
	if err := json.Unmarshal(out, &again); err != nil || !reflect.DeepEqual(again, p) {
		t.Errorf("%+v → %s → %+v, %v", p, out, again, err)
	}
}

// everyField is a Price with every field set, each amount its own.
func everyField(t *testing.T) Price {
	t.Helper()
	var p Price
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		f, amount := v.Field(i), Nanos(i+1)*NanosPerUnit/100
		switch f.Interface().(type) {
		case string:
			f.SetString("m")
		case time.Time:
			f.Set(reflect.ValueOf(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)))
		case Nanos:
			f.Set(reflect.ValueOf(amount))
		case *Nanos:
			f.Set(reflect.ValueOf(&amount))
		case []ImagePrice:
			f.Set(reflect.ValueOf([]ImagePrice{{Size: "1024x1024", Quality: "hd", Each: amount}}))
		default:
			t.Fatalf("Price.%s: a field of a type this test does not know", v.Type().Field(i).Name)
		}
	}
	return p
}

// FuzzPriceJSON: any bytes either fail to read or read as a price that
// writes and reads back the same.
func FuzzPriceJSON(f *testing.F) {
	for _, s := range []string{`{"model":"m","input":"2.5","output":"10"}`, `{"model":"m","from":"2026-06-01","reasoning":"3","images":[{"each":"0.1"}]}`,
		`{"model":"m","from":"2026-06-01T10:00:00+02:00","audio_second":"0.000001"}`, `{"model":"m","web_search":"0.01"}`, `{}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Price
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		if _, err := NewTable([]Price{p}); err != nil {
			t.Fatalf("%s read as a price NewTable refuses: %v", data, err)
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var again Price
		if err := json.Unmarshal(out, &again); err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("%s → %+v → %s → %+v, %v", data, p, out, again, err)
		}
	})
}
