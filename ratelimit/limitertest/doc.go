// Package limitertest is the conformance suite every ratelimit.Limiter
// implementation must pass, and the fake Clock it drives them with. The
// suite pins the observable behavior described in package ratelimit:
// exact counts under concurrency, RetryAfter never early and at most a
// second late, token reservations (capped at Max) that concurrent requests
// cannot overrun, settled after the fact by charges and refunds, refusals
// that consume nothing, leases, and counters that drain.
package limitertest
