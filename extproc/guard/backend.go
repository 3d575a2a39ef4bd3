package guard

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"modelgate/authz/pricing"
	"sync"
	"time"
)

// Backend is a guard service as rules call it: each call bounded by the
// service's timeout, at most its concurrency of them at once (a call that
// finds them all busy waits within its deadline), never retried.
type Backend struct {
	// Name is the service's in the config; Type its contract, which the
	// metrics name.
	Name, Type string
	service    Service
	timeout    time.Duration
	slots      chan struct{}
	// Observe, when set, is told of each call: how long it took and
	// whether it failed.
	Observe func(b *Backend, phase Phase, took time.Duration, err error)
	// Price is what one call costs, added to the request's cost and
	// budgets; zero for none.
	Price pricing.Nanos
}

// NewBackend is service s, named name and of contract typ, called with
// timeout and at most concurrency calls at once.
func NewBackend(name, typ string, s Service, timeout time.Duration, concurrency int) *Backend {
	return &Backend{Name: name, Type: typ, service: s, timeout: timeout, slots: make(chan struct{}, max(concurrency, 1))}
}

// errBusy: every call slot stayed taken until the deadline.
var errBusy = errors.New("every call to the service is taken")

// check makes one call within the backend's timeout.
func (b *Backend) check(ctx context.Context, in Input) (Verdict, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	start := time.Now()
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return Verdict{}, b.failed(in.Phase, start, errBusy)
	}
	defer func() { <-b.slots }()
	v, err := b.service.Check(ctx, in)
	if err == nil && ctx.Err() != nil { // an answer after the deadline is no answer
		err = ctx.Err()
	}
	if err != nil {
		return Verdict{}, b.failed(in.Phase, start, err)
	}
	if b.Observe != nil {
		b.Observe(b, in.Phase, time.Since(start), nil)
	}
	return v, nil
}

func (b *Backend) failed(p Phase, start time.Time, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v", b.timeout)
	}
	err = fmt.Errorf("guard service %q: %w", b.Name, err)
	if b.Observe != nil {
		b.Observe(b, p, time.Since(start), err)
	}
	return err
}

// Cache keeps the verdicts of a request's texts by their content, so an
// agent's history, sent again every turn, is checked once: the services
// are not paid for it again while a rule still reads it. Safe for
// concurrent use; bounded, and an entry lasts TTL.
type Cache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]cached
	size    int
	ttl     time.Duration
	now     func() time.Time
}

type cached struct {
	v  Verdict
	at time.Time
}

// NewCache keeps up to size verdicts for ttl each.
func NewCache(size int, ttl time.Duration) *Cache {
	return &Cache{entries: map[[sha256.Size]byte]cached{}, size: size, ttl: ttl, now: time.Now}
}

func cacheKey(b *Backend, in Input) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00", b.Name, in.Phase, in.Part, in.Kind)
	h.Write([]byte(in.Text))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

func (c *Cache) get(k [sha256.Size]byte) (Verdict, bool) {
	if c == nil {
		return Verdict{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || c.now().Sub(e.at) > c.ttl {
		return Verdict{}, false
	}
	return e.v, true
}

func (c *Cache) put(k [sha256.Size]byte, v Verdict) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.size { // full: start again rather than track ages
		clear(c.entries)
	}
	c.entries[k] = cached{v: v, at: c.now()}
}

// checkCached is b's verdict on in, from c when it has it; called
// reports a call made (and paid for).
func (b *Backend) checkCached(ctx context.Context, c *Cache, in Input) (v Verdict, called bool, err error) {
	k := cacheKey(b, in)
	if v, ok := c.get(k); ok {
		return v, false, nil
	}
	v, err = b.check(ctx, in)
	if err == nil {
		c.put(k, v)
	}
	return v, true, err
}
