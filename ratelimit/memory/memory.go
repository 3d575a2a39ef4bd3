package memory

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"modelgate/ratelimit"
)

// eps absorbs float rounding so that a request retried exactly RetryAfter
// later is admitted. A millionth of a request or token is harmless.
const eps = 1e-6

// sweepMin is the fewest operations between two sweeps of expired state.
const sweepMin = 1024

// Config holds the optional knobs of a Limiter.
type Config struct {
	// Now returns the current time; nil means time.Now. Tests inject a fake
	// clock.
	Now func() time.Time
}

// Limiter is an in-process ratelimit.Limiter. One mutex guards all state so
// that an admission over several rules is atomic; its critical section is
// a few map lookups.
type Limiter struct {
	now func() time.Time
	// epoch is the origin of the millisecond clock. Measuring from it uses
	// Go's monotonic clock, so wall-clock steps do not refill or freeze
	// buckets.
	epoch time.Time

	mu sync.Mutex
	// buckets holds Requests and Tokens usage by state key.
	buckets map[stateKey]*bucket
	// slots holds Concurrent leases by state key: lease ID → expiry (ms
	// since epoch).
	slots map[stateKey]map[string]int64
	// leases counts the leases made, for their ids.
	leases atomic.Uint64
	// ops counts operations since the last sweep.
	ops int
}

// bucket is a leaky bucket: level units in use at time at, draining at
// Max per Window.
type bucket struct {
	level float64
	at    int64 // ms since epoch
	empty int64 // ms since epoch when level reaches zero: the bucket can go
}

// New returns an empty Limiter.
func New(cfg Config) *Limiter {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Limiter{now: now, epoch: now(), buckets: map[stateKey]*bucket{}, slots: map[stateKey]map[string]int64{}}
}

// Admit implements ratelimit.Limiter.
func (l *Limiter) Admit(ctx context.Context, rules []ratelimit.Rule, reserve int64) (ratelimit.Decision, error) {
	if err := ctx.Err(); err != nil {
		return ratelimit.Decision{}, err
	}
	if err := ratelimit.ValidateAdmit(rules, reserve); err != nil {
		return ratelimit.Decision{}, err
	}
	var kbuf [8]stateKey
	keys := kbuf[:0]
	var leaseID string
	for _, r := range rules {
		keys = append(keys, keyOf(r))
		if r.Limit.Kind == ratelimit.Concurrent && leaseID == "" {
			leaseID = l.newLeaseID()
		}
	}
	d := ratelimit.Decision{Allowed: true, Statuses: make([]ratelimit.Status, len(rules))}
	var buf [8]float64
	used := buf[:0]

	l.mu.Lock()
	now := l.millis()
	l.sweep(now)
	for i, r := range rules {
		u := l.usage(keys[i], r.Limit, now)
		used = append(used, u)
		d.Statuses[i].Allowed = u+need(r.Limit, reserve) <= float64(r.Limit.Max)+eps
		d.Allowed = d.Allowed && d.Statuses[i].Allowed
	}
	if d.Allowed {
		for i, r := range rules {
			used[i] = l.commit(keys[i], r.Limit, now, used[i], leaseID, reserve)
		}
	}
	l.mu.Unlock()

	for i, r := range rules {
		d.Statuses[i] = status(r, used[i], d.Statuses[i].Allowed, need(r.Limit, reserve))
		d.RetryAfter = max(d.RetryAfter, d.Statuses[i].RetryAfter)
		if d.Allowed && r.Limit.Kind == ratelimit.Concurrent {
			d.Lease.ID = leaseID
			d.Lease.Rules = append(d.Lease.Rules, r)
		}
	}
	return d, nil
}

// need is how many free units a rule needs to admit: one request or slot,
// or the capped reservation of tokens.
func need(lim ratelimit.Limit, reserve int64) float64 {
	if lim.Kind == ratelimit.Tokens {
		return float64(lim.Need(reserve))
	}
	return 1
}

// millis reads the clock in milliseconds since epoch.
func (l *Limiter) millis() int64 { return l.now().Sub(l.epoch).Milliseconds() }

// usage returns what a rule's counter holds at now, dropping expired leases.
func (l *Limiter) usage(key stateKey, lim ratelimit.Limit, now int64) float64 {
	if lim.Kind == ratelimit.Concurrent {
		s := l.slots[key]
		for id, exp := range s {
			if exp <= now {
				delete(s, id)
			}
		}
		return float64(len(s))
	}
	if b := l.buckets[key]; b != nil {
		return b.levelAt(now, lim)
	}
	return 0
}

// commit consumes one request or slot, or reserve tokens, and returns the
// new usage.
func (l *Limiter) commit(key stateKey, lim ratelimit.Limit, now int64, used float64, leaseID string, reserve int64) float64 {
	switch lim.Kind {
	case ratelimit.Concurrent:
		s := l.slots[key]
		if s == nil {
			s = map[string]int64{}
			l.slots[key] = s
		}
		s[leaseID] = now + lim.LeaseTTL().Milliseconds()
		return used + 1
	case ratelimit.Requests:
		l.fill(key, lim, now, 1)
		return used + 1
	}
	if reserve > 0 {
		return l.fill(key, lim, now, float64(reserve))
	}
	return used
}

// fill adds n units to a bucket, or refunds -n, never below empty, and
// returns its new level.
func (l *Limiter) fill(key stateKey, lim ratelimit.Limit, now int64, n float64) float64 {
	b := l.buckets[key]
	if b == nil {
		if n <= 0 {
			return 0 // nothing to refund
		}
		b = &bucket{at: now}
		l.buckets[key] = b
	}
	b.level = max(0, b.levelAt(now, lim)+n)
	b.at = max(b.at, now)
	b.empty = b.at + drainMillis(b.level, lim)
	return b.level
}

// levelAt drains the bucket up to now. A clock that went backwards drains
// nothing rather than refilling.
func (b *bucket) levelAt(now int64, lim ratelimit.Limit) float64 {
	if now <= b.at {
		return b.level
	}
	drained := float64(now-b.at) * float64(lim.Max) / float64(lim.Window.Milliseconds())
	return max(0, b.level-drained)
}

// drainMillis is how long, rounded up to a millisecond, units take to drain.
func drainMillis(units float64, lim ratelimit.Limit) int64 {
	if units <= 0 {
		return 0
	}
	return int64(math.Ceil(units * float64(lim.Window.Milliseconds()) / float64(lim.Max)))
}

// status describes a rule given its usage after the decision and the free
// units it needed.
func status(r ratelimit.Rule, used float64, allowed bool, need float64) ratelimit.Status {
	s := ratelimit.Status{Rule: r, Allowed: allowed}
	if r.Limit.Kind == ratelimit.Concurrent {
		s.Remaining = max(0, r.Limit.Max-int64(used))
		if !allowed {
			s.RetryAfter = ratelimit.ConcurrencyRetryAfter
		}
		return s
	}
	s.Remaining = max(0, int64(math.Floor(float64(r.Limit.Max)-used+eps)))
	s.Reset = time.Duration(drainMillis(used, r.Limit)) * time.Millisecond
	if !allowed {
		s.RetryAfter = time.Duration(drainMillis(used+need-float64(r.Limit.Max), r.Limit)) * time.Millisecond
	}
	return s
}

// Charge implements ratelimit.Limiter.
func (l *Limiter) Charge(ctx context.Context, rules []ratelimit.Rule, tokens int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ratelimit.ValidateCharge(rules, tokens); err != nil || tokens == 0 {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.millis()
	l.sweep(now)
	for _, r := range rules {
		if r.Limit.Kind == ratelimit.Tokens {
			l.fill(keyOf(r), r.Limit, now, float64(tokens))
		}
	}
	return nil
}

// Release implements ratelimit.Limiter.
func (l *Limiter) Release(ctx context.Context, lease ratelimit.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range lease.Rules {
		if r.Limit.Kind != ratelimit.Concurrent {
			continue
		}
		key := keyOf(r)
		if s := l.slots[key]; s != nil {
			delete(s, lease.ID)
			if len(s) == 0 {
				delete(l.slots, key)
			}
		}
	}
	return nil
}

// sweep drops drained buckets and expired leases once enough operations
// have passed since the last sweep, so memory stays bounded by live state
// at an amortized constant cost per operation.
func (l *Limiter) sweep(now int64) {
	l.ops++
	if l.ops < max(sweepMin, len(l.buckets)+len(l.slots)) {
		return
	}
	l.ops = 0
	for key, b := range l.buckets {
		if b.empty <= now {
			delete(l.buckets, key)
		}
	}
	for key, s := range l.slots {
		for id, exp := range s {
			if exp <= now {
				delete(s, id)
			}
		}
		if len(s) == 0 {
			delete(l.slots, key)
		}
	}
}

var _ ratelimit.Limiter = (*Limiter)(nil)

// stateKey names a rule's counter as Rule.StateKey does, as a comparable
// value: a map lookup by it builds no string.
type stateKey struct {
	key    string
	kind   ratelimit.Kind
	window int64 // milliseconds; 0 for concurrency slots
}

func keyOf(r ratelimit.Rule) stateKey {
	k := stateKey{key: r.Key, kind: r.Limit.Kind}
	if r.Limit.Kind != ratelimit.Concurrent {
		k.window = r.Limit.Window.Milliseconds()
	}
	return k
}

// newLeaseID names a lease: unique in this limiter, which is all a lease
// of an in-memory limiter needs.
func (l *Limiter) newLeaseID() string {
	return "lease-" + strconv.FormatUint(l.leases.Add(1), 36)
}
