// Package pgtest gives tests a PostgreSQL schema of their own in the
// database named by MODELGATE_TEST_POSTGRES_URL.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// URLEnv names the database the tests use, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable as in CI.
const URLEnv = "MODELGATE_TEST_POSTGRES_URL"

// Schema creates a schema of its own for the test, dropped at cleanup,
// and returns the URL of the test database with it as search_path, so that
// tests and packages running in parallel never see each other's tables. It
// skips when URLEnv is unset and fails when the server cannot be reached.
func Schema(tb testing.TB) string {
	tb.Helper()
	base := URL(tb)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("connecting to %s=%s: %v", URLEnv, base, err)
	}
	defer admin.Close(ctx)
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	schema := "modelgate_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		tb.Fatalf("creating schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			tb.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return WithParam(tb, base, "search_path", schema)
}

// URL returns URLEnv, skipping when it is unset.
func URL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(URLEnv)
	if u == "" {
		tb.Skipf("%s is unset: set it to a PostgreSQL database (CI uses postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the PostgreSQL store tests", URLEnv)
	}
	return u
}

// WithParam adds a connection parameter to a URL or key=value string.
func WithParam(tb testing.TB, base, key, value string) string {
	tb.Helper()
	if !strings.HasPrefix(base, "postgres://") && !strings.HasPrefix(base, "postgresql://") {
		return base + " " + key + "=" + value
	}
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("parsing %s: %v", URLEnv, err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}
