package admin

import (
	"math"
	"testing"
	"time"

	"modelgate/authz/ledger"
)

func TestDailyChart(t *testing.T) {
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := []ledger.UsageRow{
		{Day: from.AddDate(0, 0, 1), UsageTotals: ledger.UsageTotals{Requests: 2, TotalTokens: 400}},
		{Day: from.AddDate(0, 0, 3), UsageTotals: ledger.UsageTotals{Requests: 1, TotalTokens: 1000}},
	}
	c := dailyChart(rows, from, from.AddDate(0, 0, 4))
	if c.Empty || len(c.Bars) != 4 {
		t.Fatalf("chart = %+v", c)
	}
	base := float64(chartTop + chartPlotHeight)
	for i, want := range []float64{0, 0.4, 0, 1} { // of the top grid line, 1000
		b := c.Bars[i]
		if got := b.H / chartPlotHeight; math.Abs(got-want) > 0.001 || math.Abs(b.Y+b.H-base) > 0.11 {
			t.Errorf("bar %d: height %v of the plot at y %v, want %v ending at %v", i, got, b.Y, want, base)
		}
		if i > 0 && b.X <= c.Bars[i-1].X {
			t.Errorf("bar %d is not right of bar %d", i, i-1)
		}
	}
	if c.Bars[1].Title != "2025-01-02: 400 tokens in 2 requests" {
		t.Errorf("title = %q", c.Bars[1].Title)
	}
	if len(c.Grid) != 3 || c.Grid[0].Label != "0" || c.Grid[1].Label != "500" || c.Grid[2].Label != "1k" {
		t.Errorf("grid = %+v", c.Grid)
	}
	if e := dailyChart(nil, from, from.AddDate(0, 0, 7)); !e.Empty || len(e.Bars) != 0 {
		t.Errorf("chart without usage = %+v", e)
	}
	if n := len(dailyChart(rows, from, from.AddDate(0, 0, 366)).Days); n > 7 {
		t.Errorf("%d day labels on a year", n)
	}
}

func TestNumbers(t *testing.T) {
	for _, tc := range []struct {
		n                int64
		nice             int64
		compact, grouped string
	}{
		{0, 1, "0", "0"}, {1, 1, "1", "1"}, {3, 5, "3", "3"}, {7, 10, "7", "7"}, {1000, 1000, "1k", "1,000"},
		{1001, 2000, "1.001k", "1,001"}, {1500000, 2000000, "1.5M", "1,500,000"}, {-1234, 1, "-1234", "-1,234"},
	} {
		if got := niceCeil(tc.n); got != tc.nice {
			t.Errorf("niceCeil(%d) = %d, want %d", tc.n, got, tc.nice)
		}
		if got := compact(tc.n); got != tc.compact {
			t.Errorf("compact(%d) = %q, want %q", tc.n, got, tc.compact)
		}
		if got := formatNum(tc.n); got != tc.grouped {
			t.Errorf("formatNum(%d) = %q, want %q", tc.n, got, tc.grouped)
		}
	}
}
