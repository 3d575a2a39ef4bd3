package storetest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
)

// Benchmark measures a store on the paths every request takes: key lookup
// through the Authenticator (from its cache, and from the store on a miss)
// and usage appends, one by one and in batches of 100 as a ledger queue
// would flush them. newStore returns an empty store per benchmark.
func Benchmark(b *testing.B, newStore func(b *testing.B) authz.Store) {
	b.Run("AuthenticateCached", func(b *testing.B) {
		s, secret := benchKey(b, newStore)
		benchAuthenticate(b, authz.NewAuthenticator(s, authz.AuthenticatorConfig{TTL: time.Hour}), secret)
	})
	b.Run("AuthenticateMiss", func(b *testing.B) {
		s, secret := benchKey(b, newStore)
		// Entries expire at once: every call reads key, account and group.
		benchAuthenticate(b, authz.NewAuthenticator(s, authz.AuthenticatorConfig{TTL: time.Nanosecond}), secret)
	})
	b.Run("AppendUsage", func(b *testing.B) {
		s := newStore(b)
		defer s.Close()
		ctx := context.Background()
		rec := benchRecord()
		b.ReportAllocs()
		for b.Loop() {
			if err := s.AppendUsage(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	// As a ledger writes them: each record with an id of its own, in
	// batches of a few, some dozens or hundreds.
	for _, n := range []int{3, 37, 100, 500} {
		b.Run("AppendUsageBatch"+strconv.Itoa(n), func(b *testing.B) {
			s := newStore(b)
			defer s.Close()
			ctx := context.Background()
			recs := make([]ledger.UsageRecord, n)
			for i := range recs {
				recs[i] = benchRecord()
				recs[i].RequestID = "req-" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			batch := 0
			for b.Loop() {
				batch++
				for i := range recs {
					recs[i].ID = fmt.Sprintf("%016x-%d-%d", uint64(i)*0x9e3779b97f4a7c15, batch, i)
				}
				if err := s.AppendUsageBatch(ctx, recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}

// benchKey makes a key of an account in a group, each restricting models.
func benchKey(b *testing.B, newStore func(b *testing.B) authz.Store) (authz.Store, string) {
	ctx := context.Background()
	s := newStore(b)
	b.Cleanup(func() { s.Close() })
	g, err := s.CreateGroup(ctx, authz.Group{Name: "team", Models: []string{"gpt-4o", "claude", "o3"},
		Limits: authz.Limits{RequestsPerMinute: new(int64(600))}})
	if err != nil {
		b.Fatal(err)
	}
	a, err := s.CreateAccount(ctx, "acme")
	if err != nil {
		b.Fatal(err)
	}
	a.GroupID, a.Models = g.ID, []string{"gpt-4o", "claude"}
	if err := s.UpdateAccount(ctx, a); err != nil {
		b.Fatal(err)
	}
	secret, _, err := authz.CreateKey(ctx, s, a.ID, "bench", []string{"gpt-4o"})
	if err != nil {
		b.Fatal(err)
	}
	return s, secret
}

func benchAuthenticate(b *testing.B, auth *authz.Authenticator, secret string) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := auth.Authenticate(ctx, secret); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRecord() ledger.UsageRecord {
	return ledger.UsageRecord{RequestID: "req", KeyID: "key_0123456789abcdef", AccountID: "acct_0123456789abcdef",
		Endpoint: "chat.completions", Model: "gpt-4o", Backend: "openai", Status: 200, PromptTokens: 812,
		CompletionTokens: 230, TotalTokens: 1042, CachedTokens: 512, Duration: 1200 * time.Millisecond, At: time.Now()}
}
