package redis

import (
	"cmp"
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"modelgate/ratelimit"
)

var (
	//go:embed admit.lua
	admitLua string
	//go:embed charge.lua
	chargeLua string
	//go:embed release.lua
	releaseLua string
)

// Defaults of Config.
const (
	DefaultPrefix  = "modelgate:ratelimit:"
	DefaultTimeout = 200 * time.Millisecond
)

// Config holds the optional knobs of a Limiter.
type Config struct {
	// Prefix starts every key, so several deployments (or test runs) can
	// share one Redis; empty means DefaultPrefix. With Redis Cluster, put a
	// hash tag in it ("{modelgate-rl}:"): one call's keys must share a slot.
	Prefix string
	// Timeout bounds each Redis call; zero means DefaultTimeout. Keep it
	// well under the ext_proc message timeout.
	Timeout time.Duration
	// Now returns the time passed to the scripts; nil means time.Now.
	Now func() time.Time
}

// Limiter is a ratelimit.Limiter whose counters live in Redis, shared by
// every replica. It does not own the client.
type Limiter struct {
	client  goredis.Scripter
	prefix  string
	timeout time.Duration
	now     func() time.Time
	admit   *goredis.Script
	charge  *goredis.Script
	release *goredis.Script
}

// New returns a Limiter on client. The client must honor context
// deadlines (Options.ContextTimeoutEnabled); otherwise a stalled Redis
// would hold calls for its socket timeouts instead of Config.Timeout.
func New(client goredis.Scripter, cfg Config) (*Limiter, error) {
	if client == nil {
		return nil, errors.New("redis rate limiter: nil client")
	}
	if !honorsDeadlines(client) {
		return nil, errors.New("redis rate limiter: the client must set ContextTimeoutEnabled so each call is bounded by its timeout")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("redis rate limiter: negative timeout %v", cfg.Timeout)
	}
	l := &Limiter{
		client:  client,
		prefix:  cmp.Or(cfg.Prefix, DefaultPrefix),
		timeout: cmp.Or(cfg.Timeout, DefaultTimeout),
		now:     cfg.Now,
		admit:   goredis.NewScript(admitLua),
		charge:  goredis.NewScript(chargeLua),
		release: goredis.NewScript(releaseLua),
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l, nil
}

// honorsDeadlines reports whether the client bounds socket I/O by context
// deadlines. Clients of unknown types are trusted.
func honorsDeadlines(c goredis.Scripter) bool {
	switch c := c.(type) {
	case *goredis.Client:
		return c.Options().ContextTimeoutEnabled
	case *goredis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *goredis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Admit implements ratelimit.Limiter in one script call.
func (l *Limiter) Admit(ctx context.Context, rules []ratelimit.Rule, reserve int64) (ratelimit.Decision, error) {
	if err := ctx.Err(); err != nil {
		return ratelimit.Decision{}, err
	}
	if err := ratelimit.ValidateAdmit(rules, reserve); err != nil {
		return ratelimit.Decision{}, err
	}
	if len(rules) == 0 {
		return ratelimit.Decision{Allowed: true, Statuses: []ratelimit.Status{}}, nil
	}
	var leaseID string
	keys := make([]string, len(rules))
	args := make([]any, 3, 3+3*len(rules))
	for i, r := range rules {
		keys[i] = l.prefix + r.StateKey()
		window := r.Limit.Window
		if r.Limit.Kind == ratelimit.Concurrent {
			window = r.Limit.LeaseTTL()
			if leaseID == "" {
				leaseID = rand.Text()
			}
		}
		args = append(args, kindCode(r.Limit.Kind), r.Limit.Max, window.Milliseconds())
	}
	args[0], args[1], args[2] = l.now().UnixMilli(), leaseID, reserve

	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	vals, err := l.admit.Run(ctx, l.client, keys, args...).Int64Slice()
	if err != nil {
		return ratelimit.Decision{}, fmt.Errorf("admitting in redis: %w", err)
	}
	if len(vals) != 1+4*len(rules) {
		return ratelimit.Decision{}, fmt.Errorf("admitting in redis: script returned %d values for %d rules", len(vals), len(rules))
	}
	return decision(rules, vals, leaseID), nil
}

// decision reads the admit script's reply.
func decision(rules []ratelimit.Rule, vals []int64, leaseID string) ratelimit.Decision {
	d := ratelimit.Decision{Allowed: vals[0] == 1, Statuses: make([]ratelimit.Status, len(rules))}
	for i, r := range rules {
		v := vals[1+4*i:]
		s := ratelimit.Status{
			Rule:       r,
			Allowed:    v[0] == 1,
			Remaining:  v[1],
			Reset:      time.Duration(v[2]) * time.Millisecond,
			RetryAfter: time.Duration(v[3]) * time.Millisecond,
		}
		if r.Limit.Kind == ratelimit.Concurrent {
			if !s.Allowed {
				s.RetryAfter = ratelimit.ConcurrencyRetryAfter
			}
			if d.Allowed {
				d.Lease.ID = leaseID
				d.Lease.Rules = append(d.Lease.Rules, r)
			}
		}
		d.Statuses[i] = s
		d.RetryAfter = max(d.RetryAfter, s.RetryAfter)
	}
	return d
}

func kindCode(k ratelimit.Kind) string {
	switch k {
	case ratelimit.Requests:
		return "r"
	case ratelimit.Tokens:
		return "t"
	}
	return "c"
}

// Charge implements ratelimit.Limiter in one script call.
func (l *Limiter) Charge(ctx context.Context, rules []ratelimit.Rule, tokens int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ratelimit.ValidateCharge(rules, tokens); err != nil || tokens == 0 {
		return err
	}
	var keys []string
	args := []any{l.now().UnixMilli(), tokens}
	for _, r := range rules {
		if r.Limit.Kind == ratelimit.Tokens {
			keys = append(keys, l.prefix+r.StateKey())
			args = append(args, r.Limit.Max, r.Limit.Window.Milliseconds())
		}
	}
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.charge.Run(ctx, l.client, keys, args...).Err(); err != nil {
		return fmt.Errorf("charging %d tokens in redis: %w", tokens, err)
	}
	return nil
}

// Release implements ratelimit.Limiter in one script call.
func (l *Limiter) Release(ctx context.Context, lease ratelimit.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var keys []string
	for _, r := range lease.Rules {
		if r.Limit.Kind == ratelimit.Concurrent {
			keys = append(keys, l.prefix+r.StateKey())
		}
	}
	if lease.ID == "" || len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.release.Run(ctx, l.client, keys, lease.ID).Err(); err != nil {
		return fmt.Errorf("releasing lease in redis: %w", err)
	}
	return nil
}

var _ ratelimit.Limiter = (*Limiter)(nil)
