package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pool is pgxpool with the one call the store makes: it caps connections,
// reuses idle ones, drops broken ones and health-checks idle ones.
type pool struct{ *pgxpool.Pool }

// with runs fn on a connection of the pool. fn must finish with the
// connection (rows closed, transaction ended) before returning.
func (p *pool) with(ctx context.Context, fn func(*pgx.Conn) error) error {
	return p.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return fn(c.Conn()) })
}

func (p *pool) close() { p.Close() }
