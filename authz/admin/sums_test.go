package admin

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
)

// A ledger whose sums pass 2^63 (records of counts the gateway never
// writes, but an older ledger may hold) shows them saturated on the usage
// page, its total and chart and the account page, never wrapped below
// zero or failing the page.
func TestUsageBeyondCounting(t *testing.T) {
	forEachStore(t, func(t *testing.T, s authz.Store) { usageBeyondCounting(t, s) })
}

func usageBeyondCounting(t *testing.T, s authz.Store) {
	h := newHarness(t, s)
	ctx := context.Background()
	a, _ := s.CreateAccount(ctx, "acme")
	_, k, _ := authz.CreateKey(ctx, s, a.ID, "laptop", nil)
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3).Add(12 * time.Hour)
	var recs []ledger.UsageRecord
	for i, at := range []time.Time{day, day, day.AddDate(0, 0, 1)} {
		recs = append(recs, ledger.UsageRecord{RequestID: string(rune('a' + i)), KeyID: k.ID, AccountID: a.ID, Model: "m", Status: 200,
			PromptTokens: 1 << 62, CompletionTokens: 1 << 62, TotalTokens: math.MaxInt64, Cost: math.MaxInt64, CostKnown: true, At: at})
	}
	if err := s.AppendUsageBatch(ctx, recs); err != nil {
		t.Fatal(err)
	}
	most := formatNum(math.MaxInt64)
	b := newBrowser(t, h.srv)
	b.signIn(t)
	from, to := day.AddDate(0, 0, -1).Format(time.DateOnly), day.AddDate(0, 0, 3).Format(time.DateOnly)
	p := b.get(t, "/admin/usage?from="+from+"&to="+to+"&grouped=1&by=day")
	if p.StatusCode != 200 {
		t.Fatalf("usage page: %d %s", p.StatusCode, p.Body)
	}
	for _, want := range []string{`<td class="num">` + most + `</td>`, most + " in all, at most " + most + " in a day"} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("usage page lacks %q", want)
		}
	}
	if strings.Contains(p.Body, `<td class="num">-`) {
		t.Error("usage page shows a negative sum")
	}
	if p := b.get(t, "/admin/accounts/"+a.ID); p.StatusCode != 200 || !strings.Contains(p.Body, most+" tokens in the last 30 days") {
		t.Errorf("account page: %d, want %s tokens: %s", p.StatusCode, most, p.Body)
	}
}
