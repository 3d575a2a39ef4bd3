// Package redis is the ratelimit.Limiter shared by replicas: counters live
// in Redis, so limits hold across every modelgate serve process.
//
// Each Admit, Charge and Release is one Lua script call (admit.lua,
// charge.lua, release.lua), so an admission over all of a request's rules
// is atomic on the server: nothing is consumed unless every rule allows.
// Scripts run by EVALSHA and fall back to EVAL when Redis lost them (restart,
// failover, SCRIPT FLUSH).
//
// Keys are Config.Prefix + Rule.StateKey(): "<prefix>key:k1:r:60000" (a
// hash of level and time), "<prefix>key:k1:t:86400000", "<prefix>key:k1:c"
// (a sorted set of leases scored by expiry). Every write sets a TTL of the
// time the state takes to drain (plus a second) or of the lease lifetime,
// so idle subjects cost nothing. With Redis Cluster all keys of one call
// must share a slot: use a hash tag in the prefix.
//
// Time comes from Config.Now on the calling replica, passed to the scripts
// in milliseconds; package ratelimit explains why clock skew is harmless.
//
// Every call runs under its own Config.Timeout, which requires a client
// with ContextTimeoutEnabled (New checks). Errors are returned, wrapped,
// never swallowed: the caller decides to fail open or closed. A client
// with retries (go-redis defaults to 3) may run a script twice when a reply
// is lost; that counts a request, a reservation or a charge twice, erring
// toward refusal, or a refund twice, erring toward admission by at most the
// refund (a counter never drops below empty).
package redis
