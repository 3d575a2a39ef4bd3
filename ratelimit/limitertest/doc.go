// Package limitertest is the conformance suite every ratelimit.Limiter
// implementation must pass, and the fake Clock it drives them with. The
// suite pins the observable behavior described in package ratelimit:
// exact counts under concurrency, RetryAfter never early and at most a
// second late, token reservations (capped at Max) that concurrent requests
// cannot overrun, settled after the fact by charges and refunds, refusals
// that consume nothing, leases, and counters that drain. Beside it are the
// suites of the Spenders of money budgets (RunSpender), of rebuilding
// their lost counters from the ledger (RunSeeding), and of making the
// charges a failing store missed (RunReconciling, with Failing to break a
// Spender in memory).
package limitertest
