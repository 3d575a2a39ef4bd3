// Package ratelimit limits requests and tokens per subject (API key,
// account, group): requests per window, tokens per window (per minute and
// per day), and requests in flight. It holds the types and the Limiter
// interface; ratelimit/memory and ratelimit/redis implement it and pass the
// suite in ratelimit/limitertest. They also enforce money budgets per day,
// calendar month or fixed window (Budget, Spender): a counter per budget
// and period that reservations and charges add to, in billionths of a
// currency unit. Both Spenders are Seedable: Seeded rebuilds a counter
// they lost (a restart, a Redis flushed, a new period) from the usage
// ledger before the first reservation that needs it (LedgerSpender, from
// the ledger's SpentSince). A Reconciler keeps
// the charges a Spender failed to make (Redis down or too slow) and makes
// them once it answers again, before the next reservation of their
// budgets: a counter that exists is never rebuilt, so a charge it missed
// would stay missed for the rest of the period.
//
// # Using it from ext_proc
//
// One exchange makes three calls on the same rules (the caller builds them
// from its configuration, e.g. key:<id>, account:<id> and group:<id> rules):
//
//  1. At admission (the request body, once the request is validated and
//     routed):
//     d, err := lim.Admit(ctx, rules, reserve), reserve being an estimate
//     of the tokens the exchange will use (prompt plus max output, say). It
//     decides on every rule at once and consumes only if all allow: one
//     request per Requests rule, a slot per Concurrent rule (d.Lease) and
//     reserve tokens per Tokens rule. A Tokens rule admits when
//     min(reserve, Max) tokens are free (one when reserve is 0), so
//     concurrent requests cannot together overrun a budget they each fit
//     in. Calling Admit with reserve 0 and only Tokens rules is a pure
//     budget check.
//     On err there is no decision: fail open (go on, with no lease) or
//     closed, as configured. ErrInvalid means a configuration bug.
//     On !d.Allowed reply 429 rate_limit_error with Retry-After from
//     d.RetryAfter (rounded up to seconds).
//  2. On every response, allowed or not, the OpenAI headers come from
//     d.Tightest(Requests) and d.Tightest(Tokens):
//     x-ratelimit-limit-<kind> = Rule.Limit.Max,
//     x-ratelimit-remaining-<kind> = Remaining,
//     x-ratelimit-reset-<kind> = Reset formatted as OpenAI does ("6s",
//     "1m30s", "250ms"). Rendering them is the caller's job.
//  3. When the exchange ends, however it ends (done, upstream error, client
//     cancel, stream reset), on context.WithoutCancel(ctx) plus a timeout:
//     lim.Charge(ctx, rules, usage.TotalTokens-reserve) and
//     lim.Release(ctx, d.Lease). The charge settles the reservation: a
//     negative one refunds what was reserved but not used. Charge the full
//     usage (nothing was reserved) when Admit failed open; Release of the
//     zero Lease is a no-op.
//
// # Algorithm: GCRA, in its leaky-bucket form
//
// Each counter is a level (units in use) and the time it was measured; the
// level drains continuously at Max per Window. A Requests rule admits when
// level+1 <= Max and adds 1; a Tokens rule admits when
// level+min(reserve, Max) <= Max (reserve 0 counts as 1) and adds reserve.
// Charge then adds the difference between real usage and the reservation:
// an overrun pushes the level past Max (admissions are refused until it
// drains back), a refund lowers it, but never below zero. Remaining is
// floor(Max-level), Reset the time to drain to zero, RetryAfter the time
// until the refused request would fit.
//
// Why this and not windows:
//   - Two numbers per counter, whatever the traffic: cheap in memory and in
//     Redis, and a whole request's rules fit in one atomic Lua script. A
//     sliding-window log needs an entry per request (impossible per token).
//   - RetryAfter and Reset are exact (to the millisecond) and honest: a
//     client that waits RetryAfter is admitted. A sliding-window counter
//     only approximates them; fixed windows admit double bursts at window
//     edges and make refused clients retry together at the boundary.
//   - It is what OpenAI's own headers describe: budgets replenish
//     continuously ("x-ratelimit-reset-requests: 6s" at 10 requests per
//     minute), so SDK retry logic behaves as it does against OpenAI.
//   - Settling after the fact needs nothing special: an overrun is debt
//     that drains at the limit's rate, a refund is negative usage.
//
// The trade-off: a limit is a rate, not a quota. A subject idle for a
// Window may spend Max at once and then Max per Window more as it drains,
// so one Window-long span can see up to about twice Max. Hard spending caps
// belong to the usage ledger, not here.
//
// Concurrent rules hand out leases that expire after the rule's Window
// (DefaultLeaseTTL when zero), so slots leaked by a crashed replica heal.
// An exchange that outlives its lease silently loses its slot: choose a
// Window above the longest stream.
//
// # Time
//
// Implementations read time from an injected clock. The Redis scripts get
// "now" (milliseconds) from the calling replica, not from Redis TIME: the
// conformance suite then drives memory and Redis with the same fake clock,
// deterministically and without sleeps. It is safe across replicas because
// their clocks are NTP-synchronized to milliseconds while limits span
// seconds to days: a replica off by d misjudges the drain by d*Max/Window
// units, a few requests' worth at most, and a clock running behind the
// stored timestamp drains nothing (the stored time only moves forward), so
// skew never refills a bucket.
package ratelimit
