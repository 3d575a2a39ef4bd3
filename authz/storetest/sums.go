package storetest

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

// The most of each count the gateway records (translate.MaxUsageCount and
// translate.MaxAudioSeconds), and of a cost a budget counts
// (ratelimit.MaxSpend): authz imports neither package.
const (
	maxCount   = 1 << 32
	maxAudio   = (1 << 24) * time.Second
	maxSpend   = 1 << 53
	largeRows  = 5
	beyondRows = 3
)

// testUsageSums: the sums of records of the largest counts the gateway
// writes are exact, and the sums of counts it never writes but a ledger
// may hold (written before the gateway bounded usage, or by hand), near
// 2^63 or below zero, saturate instead of failing the report, the
// dashboard and the rebuilding of budget counters: SQLite's SUM fails
// past 2^63 ("integer overflow"), PostgreSQL's is a numeric that does not
// scan into an int64.
func testUsageSums[S ledgerStore](t *testing.T, s S) {
	ctx := context.Background()
	at := time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)
	large, beyond, below := mustAccount(t, s, "large"), mustAccount(t, s, "beyond"), mustAccount(t, s, "below")
	rec := func(acct authz.Account, i int, count, total, cost int64, audio time.Duration) ledger.UsageRecord {
		return ledger.UsageRecord{RequestID: fmt.Sprintf("sums-%s-%d", acct.Name, i), KeyID: "key_" + acct.Name, AccountID: acct.ID,
			Endpoint: "chat.completions", Model: "m", Backend: "b", Status: 200, PromptTokens: count, CompletionTokens: count,
			TotalTokens: total, CachedTokens: count, CacheWriteTokens: count, CacheWrite1hTokens: count, ReasoningTokens: count,
			Cost: pricing.Nanos(cost), CostKnown: true, Audio: audio, Images: count, At: at}
	}
	var recs []ledger.UsageRecord
	for i := range largeRows {
		recs = append(recs, rec(large, i, maxCount, 2*maxCount, maxSpend, maxAudio))
	}
	for i := range beyondRows {
		recs = append(recs, rec(beyond, i, 1<<62, math.MaxInt64, math.MaxInt64, math.MaxInt64))
	}
	for i := range beyondRows {
		recs = append(recs, rec(below, i, -1<<62, math.MinInt64, -1<<62, 0))
	}
	if err := s.AppendUsageBatch(ctx, recs); err != nil {
		t.Fatalf("AppendUsageBatch: %v", err)
	}
	totals := func(n, count, total int64, cost pricing.Nanos, audio time.Duration) ledger.UsageTotals {
		return ledger.UsageTotals{Requests: n, PromptTokens: count, CompletionTokens: count, TotalTokens: total, CachedTokens: count,
			CacheWriteTokens: count, CacheWrite1hTokens: count, ReasoningTokens: count, Cost: cost, Audio: audio, Images: count}
	}
	want := map[string]ledger.UsageTotals{
		large.ID:  totals(largeRows, largeRows*maxCount, largeRows*2*maxCount, largeRows*maxSpend, largeRows*maxAudio),
		beyond.ID: totals(beyondRows, math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64),
		below.ID:  totals(beyondRows, math.MinInt64, math.MinInt64, math.MinInt64, 0),
	}
	for _, acct := range []authz.Account{large, beyond, below} {
		got, err := s.UsageSince(ctx, acct.ID, at)
		if err != nil {
			t.Errorf("UsageSince(%s): %v", acct.Name, err)
		} else if diff := gocmp.Diff(want[acct.ID], got); diff != "" {
			t.Errorf("UsageSince(%s) (-want +got):\n%s", acct.Name, diff)
		}
		spent, err := s.SpentSince(ctx, "account:"+acct.ID, at)
		if err != nil || spent != want[acct.ID].Cost {
			t.Errorf("SpentSince(%s) = %v, %v; want %v", acct.Name, spent, err, want[acct.ID].Cost)
		}
	}
	rows, err := s.UsageReport(ctx, ledger.UsageQuery{From: at, By: ledger.ByDay | ledger.ByAccount | ledger.ByKey | ledger.ByModel})
	if err != nil {
		t.Fatalf("UsageReport: %v", err)
	}
	if len(rows) != 3 {
		t.Fatalf("UsageReport: %d rows, want 3: %+v", len(rows), rows)
	}
	for _, r := range rows {
		if diff := gocmp.Diff(want[r.AccountID], r.UsageTotals); diff != "" {
			t.Errorf("UsageReport row of %s (-want +got):\n%s", r.AccountID, diff)
		}
	}
	// All of them in one row: the counts near 2^63 and below zero cancel
	// out, exactly, however the database orders the rows it sums.
	all := totals(largeRows+2*beyondRows, largeRows*maxCount, largeRows*2*maxCount-3, math.MaxInt64, math.MaxInt64)
	if rows, err := s.UsageReport(ctx, ledger.UsageQuery{From: at}); err != nil || len(rows) != 1 {
		t.Errorf("UsageReport(all) = %+v, %v; want one row", rows, err)
	} else if diff := gocmp.Diff(all, rows[0].UsageTotals); diff != "" {
		t.Errorf("UsageReport(all) (-want +got):\n%s", diff)
	}
}
