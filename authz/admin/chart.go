package admin

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"modelgate/authz/ledger"
)

// chart is a bar chart of tokens per day, laid out here in SVG user units
// so that the template only draws it: no script, no external library.
type chart struct {
	Width, Height int
	// Left and Right are the plot's horizontal bounds, for grid lines.
	Left, Right float64
	Bars        []chartBar
	Grid        []chartTick
	Days        []chartTick
	// Summary describes the chart for screen readers.
	Summary string
	Empty   bool
}

// chartBar is one day's bar; Title is its tooltip.
type chartBar struct {
	X, Y, W, H float64
	Title      string
}

// chartTick is a labelled grid line (Pos is y) or day label (Pos is x).
type chartTick struct {
	Pos   float64
	Label string
}

// The chart's size and margins, in SVG user units.
const (
	chartWidth, chartHeight         = 760, 240
	chartLeft, chartRight           = 56, 8
	chartTop, chartBottom           = 10, 26
	chartPlotWidth, chartPlotHeight = chartWidth - chartLeft - chartRight, chartHeight - chartTop - chartBottom
)

// dailyChart charts rows grouped by day over [from, to), a bar per day,
// days without usage included.
func dailyChart(rows []ledger.UsageRow, from, to time.Time) chart {
	byDay := make(map[time.Time]ledger.UsageTotals, len(rows))
	var peak, total int64
	for _, r := range rows {
		byDay[r.Day.UTC()] = r.UsageTotals
		peak, total = max(peak, r.TotalTokens), add(total, r.TotalTokens)
	}
	var days []time.Time
	for d := from.UTC().Truncate(24 * time.Hour); d.Before(to); d = d.AddDate(0, 0, 1) {
		days = append(days, d)
	}
	c := chart{Width: chartWidth, Height: chartHeight, Left: chartLeft, Right: chartWidth - chartRight,
		Empty: total == 0 || len(days) == 0}
	c.Summary = fmt.Sprintf("Tokens per day from %s to %s: %s in all, at most %s in a day.",
		from.Format(time.DateOnly), to.AddDate(0, 0, -1).Format(time.DateOnly), formatNum(total), formatNum(peak))
	if c.Empty {
		return c
	}
	top := niceCeil(peak)
	for _, f := range []float64{0, 0.5, 1} {
		c.Grid = append(c.Grid, chartTick{round(chartTop + chartPlotHeight*(1-f)), compact(int64(f * float64(top)))})
	}
	step := float64(chartPlotWidth) / float64(len(days))
	labelEvery := max(1, (len(days)+5)/6) // at most about six day labels
	for i, d := range days {
		u := byDay[d]
		h := float64(chartPlotHeight) * float64(u.TotalTokens) / float64(top)
		x := chartLeft + float64(i)*step
		c.Bars = append(c.Bars, chartBar{X: round(x + step*0.1), Y: round(chartTop + chartPlotHeight - h), W: round(max(step*0.8, 1)),
			H: round(h), Title: fmt.Sprintf("%s: %s tokens in %s requests", d.Format(time.DateOnly), formatNum(u.TotalTokens), formatNum(u.Requests))})
		if i%labelEvery == 0 {
			c.Days = append(c.Days, chartTick{round(x + step/2), d.Format("Jan 2")})
		}
	}
	return c
}

// niceCeil is the smallest 1, 2 or 5 times a power of ten that is at
// least n, so grid labels are round numbers.
func niceCeil(n int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= n || m*p > math.MaxInt64/10 {
				return m * p
			}
		}
	}
}

// compact writes 1500 as 1.5k and 2000000 as 2M.
func compact(n int64) string {
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if float64(n) >= u.div {
			return strconv.FormatFloat(float64(n)/u.div, 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func round(f float64) float64 { return math.Round(f*10) / 10 }
