package authz_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"modelgate/authz"
)

func TestBudgetJSON(t *testing.T) {
	for _, tt := range []struct {
		in, out string
		want    authz.Budget
	}{
		{`{"amount":"12.50","period":"month"}`, `{"amount":"12.50","period":"month"}`, authz.Budget{Amount: 12_500_000_000, Period: authz.PeriodMonth}},
		{`{"amount":0.001,"period":"day","alerts":true}`, `{"amount":"0.001","period":"day","alerts":true}`, authz.Budget{Amount: 1_000_000, Period: authz.PeriodDay, Alerts: true}},
		{`{"amount":"0","period":"window","window":"168h"}`, `{"amount":"0.00","period":"window","window":"168h0m0s"}`, authz.Budget{Period: authz.PeriodWindow, Window: 168 * time.Hour}},
	} {
		var b authz.Budget
		if err := json.Unmarshal([]byte(tt.in), &b); err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if b != tt.want {
			t.Errorf("%s = %+v, want %+v", tt.in, b, tt.want)
		}
		if out, _ := json.Marshal(b); string(out) != tt.out {
			t.Errorf("%s marshals as %s, want %s", tt.in, out, tt.out)
		}
	}
	for in, want := range map[string]string{
		`{"period":"month"}`:                              "needs an amount",
		`{"amount":"-1","period":"month"}`:                "want digits",
		`{"amount":"1","period":"year"}`:                  `must be day, month or window, not "year"`,
		`{"amount":"1","period":"window","window":"30s"}`: "at least a minute",
		`{"amount":"1","period":"window"}`:                "at least a minute",
		`{"amount":"1","period":"day","window":"1h"}`:     "a budget per day has no window",
		`{"amount":"1","period":"window","window":"x"}`:   "want a duration",
		`{"amount":"99999999","period":"day"}`:            "between 0 and",
	} {
		var b authz.Budget
		if err := json.Unmarshal([]byte(in), &b); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", in, err, want)
		}
	}
}

// FuzzBudgetJSON: any bytes either fail to read or read as a valid budget
// that writes and reads back the same.
func FuzzBudgetJSON(f *testing.F) {
	for _, s := range []string{`{"amount":"12.50","period":"month"}`, `{"amount":1e3,"period":"day","alerts":true}`,
		`{"amount":"0","period":"window","window":"168h"}`, `{"amount":"99999999999","period":"window","window":"-1m"}`, `null`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var b authz.Budget
		if err := json.Unmarshal(data, &b); err != nil {
			return
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("%s read as an invalid budget %+v: %v", data, b, err)
		}
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var again authz.Budget
		if err := json.Unmarshal(out, &again); err != nil || again != b {
			t.Fatalf("%s → %+v → %s → %+v, %v", data, b, out, again, err)
		}
	})
}
