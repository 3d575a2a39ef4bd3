package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

// ledgerStore is what the Ledger suite uses: the ledger, and the accounts
// and groups its records and budget subjects name.
type ledgerStore interface {
	ledger.UsageStore
	authz.Accounts
	authz.Groups
}

// Ledger tests ledger.UsageStore. A group's spending is its accounts' records:
// the stores have authz.Accounts and authz.Groups too.
func Ledger[S interface {
	ledger.UsageStore
	authz.Accounts
	authz.Groups
}](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore,
		test[S]{"Usage", testUsage[S]},
		test[S]{"UsageReport", testUsageReport[S]},
		test[S]{"SpentSince", testSpentSince[S]},
		test[S]{"UsageSums", testUsageSums[S]},
		test[S]{"UsageConcurrent", testUsageConcurrent[S]},
		test[S]{"UsageIdempotent", testUsageIdempotent[S]},
		test[S]{"UsageRetention", testUsageRetention[S]},
		test[S]{"Requests", testRequests[S]},
		test[S]{"RequestGuardrails", testRequestGuardrails[S]},
		test[S]{"GuardrailsStorable", testGuardrailsStorable[S]},
		test[S]{"RequestModelNames", testRequestModelNames[S]},
	)
}

func testUsage[S ledgerStore](t *testing.T, s S) {
	ctx := context.Background()
	a := mustAccount(t, s, "acme")
	t0 := time.Now().Add(-time.Hour)
	for i, at := range []time.Time{t0.Add(-time.Minute), t0, t0.Add(time.Minute)} {
		rec := ledger.UsageRecord{RequestID: string(rune('a' + i)), KeyID: "k", AccountID: a.ID, Endpoint: "chat.completions",
			Model: "gpt-4o", Backend: "b", Status: 200, PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15,
			CachedTokens: 4, CacheWriteTokens: 3, CacheWrite1hTokens: 1, ReasoningTokens: 2, Duration: 1500 * time.Millisecond, At: at,
			// the last one's cost is unknown (its model had no price)
			Cost: pricing.Nanos(1000 * (i + 1)), CostKnown: i != 2, Audio: time.Duration(i) * 500 * time.Millisecond, Images: int64(i),
			WebSearchRequests: int64(2 * i)}
		if err := s.AppendUsage(ctx, rec); err != nil {
			t.Fatalf("AppendUsage: %v", err)
		}
	}
	// A failed attempt Envoy retried elsewhere is stored, and is no request.
	attempt := ledger.UsageRecord{RequestID: "b", AccountID: a.ID, Endpoint: "chat.completions", Model: "gpt-4o", Backend: "down",
		Status: 503, Attempt: 1, At: t0}
	if err := s.AppendUsageBatch(ctx, []ledger.UsageRecord{attempt}); err != nil {
		t.Fatalf("AppendUsageBatch(attempt): %v", err)
	}
	got, err := s.UsageSince(ctx, a.ID, t0)
	if err != nil {
		t.Fatalf("UsageSince: %v", err)
	}
	want := ledger.UsageTotals{Requests: 2, PromptTokens: 20, CompletionTokens: 10, TotalTokens: 30, CachedTokens: 8, CacheWriteTokens: 6,
		CacheWrite1hTokens: 2, ReasoningTokens: 4, Cost: 2000, UnknownCost: 1, Audio: 1500 * time.Millisecond, Images: 3,
		WebSearchRequests: 6}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("UsageSince (-want +got):\n%s", diff)
	}
	if got, err := s.UsageSince(ctx, "acct_other", t0); err != nil || got != (ledger.UsageTotals{}) {
		t.Errorf("UsageSince(other account) = %+v, %v; want none", got, err)
	}
	if err := s.AppendUsageBatch(ctx, nil); err != nil {
		t.Errorf("AppendUsageBatch(nothing): %v", err)
	}
}

// day is a UTC midnight the report records cluster around.
var day = time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)

// reportRecords are usage records of two accounts, three keys and two
// models on both sides of day boundaries.
func reportRecords() []ledger.UsageRecord {
	keys := []struct{ account, key string }{{"acct_a", "key_a1"}, {"acct_a", "key_a2"}, {"acct_b", "key_b1"}}
	times := []time.Time{day.Add(-time.Millisecond), day, day.Add(12 * time.Hour), day.Add(24*time.Hour - time.Millisecond),
		day.Add(24 * time.Hour), day.Add(48*time.Hour + 5*time.Second)}
	var recs []ledger.UsageRecord
	for i, k := range keys {
		for j, model := range []string{"gpt-4o", "claude"} {
			for n, at := range times {
				v := int64(100*i + 10*j + n + 1)
				recs = append(recs, ledger.UsageRecord{RequestID: fmt.Sprintf("req-%d-%d-%d", i, j, n), KeyID: k.key,
					AccountID: k.account, Endpoint: "chat.completions", Model: model, Backend: "b", Status: 200,
					PromptTokens: v, CompletionTokens: 2 * v, TotalTokens: 3 * v, CachedTokens: v / 2, ReasoningTokens: v % 7,
					Duration: time.Duration(v) * time.Millisecond, At: at,
					Cost: pricing.Nanos(v * 1_000_003), CostKnown: n != 3, Audio: time.Duration(v%5) * time.Second, Images: v % 3,
					WebSearchRequests: v % 4})
				if n%2 == 0 { // a failed attempt before it, which reports leave out
					recs = append(recs, ledger.UsageRecord{RequestID: fmt.Sprintf("req-%d-%d-%d", i, j, n), KeyID: k.key,
						AccountID: k.account, Endpoint: "chat.completions", Model: model, Backend: "down", Status: 503, Attempt: 1, At: at})
				}
			}
		}
	}
	return recs
}

// report is the reference UsageReport: a plain loop over the records.
func report(recs []ledger.UsageRecord, q ledger.UsageQuery) []ledger.UsageRow {
	sums := map[ledger.UsageRow]ledger.UsageTotals{}
	for _, r := range recs {
		if r.Attempt != 0 || r.At.Before(q.From) || (!q.To.IsZero() && !r.At.Before(q.To)) ||
			(q.AccountID != "" && r.AccountID != q.AccountID) || (q.KeyID != "" && r.KeyID != q.KeyID) ||
			(q.Model != "" && r.Model != q.Model) {
			continue
		}
		var k ledger.UsageRow
		if q.By&ledger.ByDay != 0 {
			k.Day = r.At.UTC().Truncate(24 * time.Hour)
		}
		if q.By&ledger.ByAccount != 0 {
			k.AccountID = r.AccountID
		}
		if q.By&ledger.ByKey != 0 {
			k.KeyID = r.KeyID
		}
		if q.By&ledger.ByModel != 0 {
			k.Model = r.Model
		}
		t := sums[k]
		t.Requests++
		t.PromptTokens += r.PromptTokens
		t.CompletionTokens += r.CompletionTokens
		t.TotalTokens += r.TotalTokens
		t.CachedTokens += r.CachedTokens
		t.ReasoningTokens += r.ReasoningTokens
		if r.CostKnown {
			t.Cost += r.Cost
		} else {
			t.UnknownCost++
		}
		t.Audio += r.Audio
		t.Images += r.Images
		t.WebSearchRequests += r.WebSearchRequests
		sums[k] = t
	}
	var rows []ledger.UsageRow
	for k, t := range sums {
		k.UsageTotals = t
		rows = append(rows, k)
	}
	slices.SortFunc(rows, func(a, b ledger.UsageRow) int {
		return cmp.Or(a.Day.Compare(b.Day), cmp.Compare(a.AccountID, b.AccountID), cmp.Compare(a.KeyID, b.KeyID),
			cmp.Compare(a.Model, b.Model))
	})
	return rows
}

func testUsageReport[S ledger.UsageStore](t *testing.T, s S) {
	ctx := context.Background()
	recs := reportRecords()
	half := len(recs) / 2
	for _, r := range recs[:half] {
		if err := s.AppendUsage(ctx, r); err != nil {
			t.Fatalf("AppendUsage: %v", err)
		}
	}
	if err := s.AppendUsageBatch(ctx, recs[half:]); err != nil {
		t.Fatalf("AppendUsageBatch: %v", err)
	}
	queries := []ledger.UsageQuery{
		{From: day, To: day.Add(24 * time.Hour), By: ledger.ByDay | ledger.ByModel},
		{From: day.Add(-24 * time.Hour), AccountID: "acct_a", By: ledger.ByKey},
		{From: day.Add(-24 * time.Hour), KeyID: "key_b1", Model: "claude", By: ledger.ByDay},
		{From: day.Add(12 * time.Hour), To: day.Add(12*time.Hour + time.Millisecond)},
		{From: day.Add(-24 * time.Hour), AccountID: "acct_nobody", By: ledger.ByDay},
		{From: day.Add(72 * time.Hour)},
	}
	for by := range ledger.UsageGrouping(16) { // every combination of the four columns
		queries = append(queries, ledger.UsageQuery{From: day.Add(-24 * time.Hour), By: by})
	}
	for _, q := range queries {
		got, err := s.UsageReport(ctx, q)
		if err != nil {
			t.Fatalf("UsageReport(%+v): %v", q, err)
		}
		if diff := gocmp.Diff(report(recs, q), got); diff != "" {
			t.Errorf("UsageReport(%+v) (-want +got):\n%s", q, diff)
		}
	}
}

// testUsageConcurrent appends from many goroutines, one by one and in
// batches, and checks that no record is lost.
func testUsageConcurrent[S ledger.UsageStore](t *testing.T, s S) {
	ctx := context.Background()
	const singles, batches, batchSize, perWorker = 8, 4, 10, 25
	at := time.Now().Add(-time.Minute)
	rec := func(w, i int) ledger.UsageRecord {
		return ledger.UsageRecord{RequestID: fmt.Sprintf("%d-%d", w, i), KeyID: "k", AccountID: "acct_c", Endpoint: "embeddings",
			Model: "m", Backend: "b", Status: 200, PromptTokens: int64(i), TotalTokens: int64(i), At: at,
			Cost: pricing.Nanos(i), CostKnown: true}
	}
	var wg sync.WaitGroup
	for w := range singles {
		wg.Go(func() {
			for i := range perWorker {
				if err := s.AppendUsage(ctx, rec(w, i)); err != nil {
					t.Errorf("AppendUsage: %v", err)
				}
			}
		})
	}
	for w := range batches {
		wg.Go(func() {
			for b := range perWorker / 5 {
				var recs []ledger.UsageRecord
				for i := range batchSize {
					recs = append(recs, rec(singles+w, b*batchSize+i))
				}
				if err := s.AppendUsageBatch(ctx, recs); err != nil {
					t.Errorf("AppendUsageBatch: %v", err)
				}
			}
		})
	}
	wg.Wait()
	// Singles append 0..24 each; each batch worker appends 0..49.
	want := ledger.UsageTotals{Requests: singles*perWorker + batches*(perWorker/5)*batchSize,
		PromptTokens: singles*(perWorker*(perWorker-1)/2) + batches*(50*49/2)}
	want.TotalTokens = want.PromptTokens
	want.Cost = pricing.Nanos(want.PromptTokens)
	got, err := s.UsageSince(ctx, "acct_c", at)
	if err != nil {
		t.Fatalf("UsageSince: %v", err)
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("UsageSince after concurrent appends (-want +got):\n%s", diff)
	}
}

// A record whose ID is stored already is not stored again, alone or in a
// batch (a retried batch whose commit reply was lost); records without an
// ID may repeat.
func testUsageIdempotent[S ledgerStore](t *testing.T, s S) {
	ctx := context.Background()
	a := mustAccount(t, s, "acme")
	rec := func(id string) ledger.UsageRecord {
		return ledger.UsageRecord{ID: id, RequestID: "req", KeyID: "k", AccountID: a.ID, Endpoint: "chat.completions",
			Model: "gpt-4o", Backend: "b", Status: 200, PromptTokens: 10, TotalTokens: 10, At: time.Now()}
	}
	batch := []ledger.UsageRecord{rec("rec_1"), rec("rec_2"), rec(""), rec("")}
	for range 2 {
		if err := s.AppendUsageBatch(ctx, batch); err != nil {
			t.Fatalf("AppendUsageBatch: %v", err)
		}
	}
	if err := s.AppendUsage(ctx, rec("rec_1")); err != nil {
		t.Fatalf("AppendUsage of a stored id: %v", err)
	}
	if err := s.AppendUsageBatch(ctx, []ledger.UsageRecord{rec("rec_3"), rec("rec_3")}); err != nil {
		t.Fatalf("AppendUsageBatch with an id twice: %v", err)
	}
	got, err := s.UsageSince(ctx, a.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Requests != 7 || got.PromptTokens != 70 { // rec_1, rec_2, rec_3 once; the four without an id
		t.Errorf("UsageSince = %+v, want 7 records", got)
	}
}

// SpentSince sums the known costs of a key's, an account's or a group's
// requests from a time, as budget counters are rebuilt from it.
func testSpentSince[S ledgerStore](t *testing.T, s S) {
	ctx := context.Background()
	g, err := s.CreateGroup(ctx, authz.Group{Name: "spenders"})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := mustAccount(t, s, "spender-a"), mustAccount(t, s, "spender-b"), mustAccount(t, s, "spender-c")
	for _, acct := range []authz.Account{a, b} {
		acct.GroupID = g.ID
		if err := s.UpdateAccount(ctx, acct); err != nil {
			t.Fatal(err)
		}
	}
	since := time.Date(2030, 11, 1, 0, 0, 0, 0, time.UTC)
	rec := func(key string, acct authz.Account, at time.Time, cost int64, known bool, attempt int) ledger.UsageRecord {
		return ledger.UsageRecord{RequestID: fmt.Sprint(key, at.UnixNano(), cost, attempt), KeyID: key, AccountID: acct.ID,
			Endpoint: "chat.completions", Model: "gpt-4o", Backend: "b", Status: 200, At: at,
			Cost: pricing.Nanos(cost), CostKnown: known, Attempt: attempt}
	}
	recs := []ledger.UsageRecord{
		rec("ka", a, since.Add(-time.Millisecond), 1_000_000, true, 0), // the period before
		rec("ka", a, since, 100, true, 0),
		rec("ka", a, since.Add(time.Hour), 20, true, 0),
		rec("ka", a, since.Add(time.Hour), 999, false, 0), // unpriced: no cost
		rec("ka", a, since.Add(time.Hour), 5000, true, 1), // a failed attempt: not a request
		rec("ka2", a, since.Add(2*time.Hour), 3, true, 0),
		rec("kb", b, since.Add(time.Minute), 400, true, 0),
		rec("kc", c, since.Add(time.Minute), 7000, true, 0),
	}
	if err := s.AppendUsageBatch(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for subject, want := range map[string]pricing.Nanos{
		"key:ka": 120, "key:ka2": 3, "key:kb": 400, "key:none": 0,
		"account:" + a.ID: 123, "account:" + b.ID: 400, "account:" + c.ID: 7000,
		"group:" + g.ID: 523, "group:grp_none": 0,
	} {
		got, err := s.SpentSince(ctx, subject, since)
		if err != nil || got != want {
			t.Errorf("SpentSince(%s) = %v, %v; want %v", subject, got, err, want)
		}
	}
	if got, err := s.SpentSince(ctx, "key:ka", since.Add(-time.Hour)); err != nil || got != 1_000_120 {
		t.Errorf("SpentSince(key:ka, an hour earlier) = %v, %v; want 1000120", got, err)
	}
	for _, bad := range []string{"", "key:", "user:u", "ka"} {
		if _, err := s.SpentSince(ctx, bad, since); err == nil {
			t.Errorf("SpentSince(%q): no error", bad)
		}
	}
}

// testUsageRetention: records before the cut-off go, oldest first and at
// most the limit at a time; later ones stay.
func testUsageRetention[S ledgerStore](t *testing.T, s S) {
	ctx := context.Background()
	a := mustAccount(t, s, "retained")
	k := authz.Key{ID: "key_retained"} // the ledger does not look keys up
	cut := time.UnixMilli(1_800_000_000_000).UTC()
	for i := range 5 {
		at := cut.Add(time.Duration(i-3) * time.Hour) // 3 before the cut, 2 after
		if err := s.AppendUsage(ctx, ledger.UsageRecord{RequestID: "r", KeyID: k.ID, AccountID: a.ID, Model: "m",
			Status: 200, TotalTokens: int64(i + 1), At: at}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.DeleteUsageBefore(ctx, cut, 2)
	if err != nil || n != 2 {
		t.Fatalf("first batch: %d, %v; want 2", n, err)
	}
	if u, _ := s.UsageSince(ctx, a.ID, time.Time{}); u.Requests != 3 || u.TotalTokens != 3+4+5 {
		t.Errorf("after the first batch: %+v; want the oldest two gone", u)
	}
	if n, err := s.DeleteUsageBefore(ctx, cut, 2); err != nil || n != 1 {
		t.Errorf("second batch: %d, %v; want 1", n, err)
	}
	if n, err := s.DeleteUsageBefore(ctx, cut, 2); err != nil || n != 0 {
		t.Errorf("third batch: %d, %v; want 0", n, err)
	}
	if u, _ := s.UsageSince(ctx, a.ID, time.Time{}); u.Requests != 2 || u.TotalTokens != 9 {
		t.Errorf("after retention: %+v; want the two after the cut", u)
	}
}

// testRequests: the ledger's requests come newest first, filtered, a page
// at a time by cursor, without failed attempts.
func testRequests[S ledgerStore](t *testing.T, s S) {
	ctx := context.Background()
	a := mustAccount(t, s, "requester")
	b := mustAccount(t, s, "other requester")
	k, kb := authz.Key{ID: "key_requester"}, authz.Key{ID: "key_other_requester"} // the ledger does not look keys up
	at := time.UnixMilli(1_800_000_000_000).UTC()
	recs := []ledger.UsageRecord{
		{RequestID: "r1", KeyID: k.ID, AccountID: a.ID, Model: "m1", Status: 200, TotalTokens: 10, Cost: 5, CostKnown: true, Duration: 1500 * time.Millisecond, At: at,
			SessionID: "sess-1", WebSearchRequests: 3},
		{RequestID: "r2", KeyID: k.ID, AccountID: a.ID, Model: "m2", Status: 429, At: at.Add(time.Second)},
		{RequestID: "r3", KeyID: k.ID, AccountID: a.ID, Model: "m1", Status: 502, At: at.Add(2 * time.Second)},
		{RequestID: "r3", KeyID: k.ID, AccountID: a.ID, Model: "m1", Status: 503, Attempt: 1, At: at.Add(2 * time.Second)},
		{RequestID: "r4", KeyID: kb.ID, AccountID: b.ID, Model: "m1", Status: 200, At: at.Add(2 * time.Second)},
		{RequestID: "r5", KeyID: k.ID, AccountID: a.ID, Model: "m1", Status: 403, At: at.Add(2 * time.Second)},
	}
	for _, r := range recs {
		if err := s.AppendUsage(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(q ledger.RequestQuery) []string {
		t.Helper()
		rs, err := s.ListRequests(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.RequestID)
		}
		return out
	}
	for name, c := range map[string]struct {
		q    ledger.RequestQuery
		want []string
	}{
		"all, newest first": {ledger.RequestQuery{}, []string{"r5", "r4", "r3", "r2", "r1"}},
		"an account":        {ledger.RequestQuery{AccountID: a.ID}, []string{"r5", "r3", "r2", "r1"}},
		"a key and a model": {ledger.RequestQuery{KeyID: k.ID, Model: "m1"}, []string{"r5", "r3", "r1"}},
		"refused":           {ledger.RequestQuery{Outcome: "refused"}, []string{"r5", "r2"}},
		"failed":            {ledger.RequestQuery{Outcome: "failed"}, []string{"r3"}},
		"ok":                {ledger.RequestQuery{Outcome: "ok"}, []string{"r4", "r1"}},
		"a page":            {ledger.RequestQuery{Limit: 2}, []string{"r5", "r4"}},
		"the next page":     {ledger.RequestQuery{Limit: 2, BeforeAt: at.Add(2 * time.Second), BeforeID: "r4"}, []string{"r3", "r2"}},
	} {
		if got := ids(c.q); gocmp.Diff(c.want, got) != "" {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
	rs, _ := s.ListRequests(ctx, ledger.RequestQuery{Model: "m1", Outcome: "ok", AccountID: a.ID})
	if len(rs) != 1 || rs[0].Cost != 5 || !rs[0].CostKnown || rs[0].Duration != 1500*time.Millisecond || !rs[0].At.Equal(at) ||
		rs[0].TotalTokens != 10 || rs[0].KeyID != k.ID || rs[0].SessionID != "sess-1" || rs[0].WebSearchRequests != 3 {
		t.Errorf("r1 = %+v", rs)
	}
}

// testRequestGuardrails: a request's guardrail outcomes read back as
// written, in order, whatever its rules' names hold, and the Guard filter
// finds the requests one rule at least had its result for; a name that
// spells a result or the stored form's quoting does not make it match.
func testRequestGuardrails[S ledgerStore](t *testing.T, s S) {
	ctx := context.Background()
	a := mustAccount(t, s, "guarded")
	at := time.UnixMilli(1_800_000_000_000).UTC()
	tricky := []ledger.GuardOutcome{
		{Rule: "a,b:blocked", Phase: "request", Result: ledger.GuardAllowed},
		{Rule: `x","request","blocked"],["`, Phase: "request", Result: ledger.GuardMonitored},
		{Rule: "pii \"mask\"\t<b>&\\ é", Phase: "response", Result: ledger.GuardMasked},
	}
	recs := []ledger.UsageRecord{
		{RequestID: "g1", AccountID: a.ID, Status: 200, At: at, Guardrails: tricky},
		{RequestID: "g2", AccountID: a.ID, Status: 403, At: at.Add(time.Second),
			Guardrails: []ledger.GuardOutcome{{Rule: "jailbreak", Phase: "request", Result: ledger.GuardBlocked}}},
		{RequestID: "g3", AccountID: a.ID, Status: 200, At: at.Add(2 * time.Second)},
		// a failed attempt is no request, whatever its rules did
		{RequestID: "g3", AccountID: a.ID, Status: 503, Attempt: 1, At: at.Add(2 * time.Second),
			Guardrails: []ledger.GuardOutcome{{Rule: "jailbreak", Phase: "request", Result: ledger.GuardErrorOpen}}},
	}
	if err := s.AppendUsage(ctx, recs[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendUsageBatch(ctx, recs[1:]); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[:3] {
		rs, err := s.ListRequests(ctx, ledger.RequestQuery{RequestID: r.RequestID})
		if err != nil || len(rs) != 1 {
			t.Fatalf("ListRequests(%s) = %v, %v", r.RequestID, rs, err)
		}
		if diff := gocmp.Diff(r.Guardrails, rs[0].Guardrails); diff != "" {
			t.Errorf("%s's guardrails (-want +got):\n%s", r.RequestID, diff)
		}
	}
	for guard, want := range map[string][]string{
		ledger.GuardBlocked:     {"g2"},
		ledger.GuardMasked:      {"g1"},
		ledger.GuardAllowed:     {"g1"},
		ledger.GuardMonitored:   {"g1"},
		ledger.GuardErrorOpen:   nil,
		ledger.GuardErrorClosed: nil,
		"request":               nil, // a phase, not a result
		"a,b:blocked":           nil, // a rule's name
	} {
		rs, err := s.ListRequests(ctx, ledger.RequestQuery{Guard: guard})
		if err != nil {
			t.Fatalf("Guard %q: %v", guard, err)
		}
		if got := names(rs, func(r ledger.UsageRecord) string { return r.RequestID }); gocmp.Diff(want, got) != "" {
			t.Errorf("Guard %q: %v, want %v", guard, got, want)
		}
	}
	rs, err := s.ListRequests(ctx, ledger.RequestQuery{Guard: ledger.GuardBlocked, Outcome: "refused", AccountID: a.ID, Limit: 1})
	if err != nil || len(rs) != 1 || rs[0].RequestID != "g2" {
		t.Errorf("Guard with the other filters: %v, %v", rs, err)
	}
}

// testGuardrailsStorable: a rule's name with a NUL or invalid UTF-8 is
// stored as Storable makes it, and does not break the Guard filter.
func testGuardrailsStorable[S ledgerStore](t *testing.T, s S) {
	ctx := context.Background()
	rec := ledger.UsageRecord{RequestID: "nul", Status: 200, At: time.UnixMilli(1_800_000_000_000).UTC(),
		Guardrails: []ledger.GuardOutcome{{Rule: "bad\x00\xff", Phase: "request", Result: ledger.GuardBlocked}}}
	if err := s.AppendUsageBatch(ctx, []ledger.UsageRecord{rec}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.ListRequests(ctx, ledger.RequestQuery{Guard: ledger.GuardBlocked})
	if err != nil || len(rs) != 1 || len(rs[0].Guardrails) != 1 || rs[0].Guardrails[0].Rule != "bad\uFFFD\uFFFD" {
		t.Errorf("ListRequests = %+v, %v; want the rule named bad\uFFFD\uFFFD", rs, err)
	}
}

// testRequestModelNames: a request's three model names (the one the
// client sent, the configured one it resolved to, the provider's) read
// back as written, and the Model filter finds a request by the first two,
// never by the provider's.
func testRequestModelNames[S ledgerStore](t *testing.T, s S) {
	ctx := context.Background()
	a := mustAccount(t, s, "aliased")
	at := time.UnixMilli(1_800_000_000_000).UTC()
	recs := []ledger.UsageRecord{
		{RequestID: "n1", AccountID: a.ID, Status: 200, At: at,
			Model: "g-claude", RequestedModel: "claude-sonnet-4-5-20250929", ProviderModel: "claude-sonnet-4-5-mock-agent"},
		{RequestID: "n2", AccountID: a.ID, Status: 200, At: at.Add(time.Second),
			Model: "g-claude", RequestedModel: "g-claude", ProviderModel: "claude-sonnet-4-5-mock-agent"},
		{RequestID: "n3", AccountID: a.ID, Status: 200, At: at.Add(2 * time.Second),
			Model: "gpt-4o", RequestedModel: "gpt-4o", ProviderModel: "gpt-4o-2024-08-06"},
		// as recorded before the names were: the configured model only
		{RequestID: "n4", AccountID: a.ID, Status: 200, At: at.Add(3 * time.Second), Model: "g-claude"},
	}
	if err := s.AppendUsage(ctx, recs[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendUsageBatch(ctx, recs[1:]); err != nil {
		t.Fatal(err)
	}
	type modelNames struct{ Requested, Model, Provider string }
	for _, r := range recs {
		rs, err := s.ListRequests(ctx, ledger.RequestQuery{RequestID: r.RequestID})
		if err != nil || len(rs) != 1 {
			t.Fatalf("ListRequests(%s) = %v, %v", r.RequestID, rs, err)
		}
		want := modelNames{r.RequestedModel, r.Model, r.ProviderModel}
		if diff := gocmp.Diff(want, modelNames{rs[0].RequestedModel, rs[0].Model, rs[0].ProviderModel}); diff != "" {
			t.Errorf("%s's model names (-want +got):\n%s", r.RequestID, diff)
		}
	}
	for model, want := range map[string][]string{
		"g-claude":                     {"n4", "n2", "n1"},
		"claude-sonnet-4-5-20250929":   {"n1"},
		"gpt-4o":                       {"n3"},
		"claude-sonnet-4-5-mock-agent": nil, // the provider's id is no name a client asks by
		"":                             {"n4", "n3", "n2", "n1"},
	} {
		rs, err := s.ListRequests(ctx, ledger.RequestQuery{AccountID: a.ID, Model: model})
		if err != nil {
			t.Fatalf("Model %q: %v", model, err)
		}
		if got := names(rs, func(r ledger.UsageRecord) string { return r.RequestID }); gocmp.Diff(want, got) != "" {
			t.Errorf("Model %q: %v, want %v", model, got, want)
		}
	}
}
