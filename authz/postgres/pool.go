package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// pool is a small connection pool of pgx connections.
//
// It stands in for pgxpool, which needs github.com/jackc/puddle/v2 in
// go.mod: once that is there, with becomes pgxpool.Pool.AcquireFunc and this
// file goes away. Its policy is pgxpool's in short: at most max connections,
// idle ones reused last-in first-out, connections that come back broken,
// busy or inside a transaction closed, long-idle ones pinged before use.
type pool struct {
	cfg *pgx.ConnConfig
	// slots holds a token per connection in use, so that at most
	// cap(slots) exist: new ones are dialed only when none is idle.
	slots chan struct{}

	mu     sync.Mutex
	idle   []idleConn
	closed bool
}

type idleConn struct {
	conn  *pgx.Conn
	since time.Time
}

// pingAfter is how long a connection may sit idle before it is checked:
// the server or a proxy may have dropped it meanwhile.
const pingAfter = 30 * time.Second

var errPoolClosed = errors.New("postgres store closed")

func newPool(cfg *pgx.ConnConfig, maxConns int) *pool {
	return &pool{cfg: cfg, slots: make(chan struct{}, maxConns)}
}

// with runs fn on a connection of the pool. fn must finish with the
// connection (rows closed, transaction ended) before returning.
func (p *pool) with(ctx context.Context, fn func(*pgx.Conn) error) error {
	c, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	defer p.release(c)
	return fn(c)
}

func (p *pool) acquire(ctx context.Context) (*pgx.Conn, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		ic, ok, err := p.popIdle()
		if err != nil {
			<-p.slots
			return nil, err
		}
		if !ok {
			break
		}
		if time.Since(ic.since) < pingAfter || ic.conn.Ping(ctx) == nil {
			return ic.conn, nil
		}
		closeConn(ic.conn)
	}
	c, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return c, nil
}

func (p *pool) popIdle() (idleConn, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return idleConn{}, false, errPoolClosed
	}
	n := len(p.idle)
	if n == 0 {
		return idleConn{}, false, nil
	}
	ic := p.idle[n-1]
	p.idle = p.idle[:n-1]
	return ic, true, nil
}

func (p *pool) release(c *pgx.Conn) {
	defer func() { <-p.slots }()
	pc := c.PgConn()
	if c.IsClosed() || pc.IsBusy() || pc.TxStatus() != 'I' {
		closeConn(c)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		closeConn(c)
		return
	}
	p.idle = append(p.idle, idleConn{conn: c, since: time.Now()})
	p.mu.Unlock()
}

// close closes the idle connections; those in use close when released.
func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, ic := range idle {
		closeConn(ic.conn)
	}
}

// closeConn says goodbye to the server, briefly: the connection may be dead.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Close(ctx) //nolint:errcheck // nothing to do about it
}
