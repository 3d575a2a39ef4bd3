package redis_test

import (
	"testing"

	"modelgate/ratelimit"
	"modelgate/ratelimit/limitertest"
)

// BenchmarkAdmit measures admissions, each one round trip to Redis (two
// with the release), the parallel ones sharing the client's pool.
func BenchmarkAdmit(b *testing.B) {
	c := testClient(b)
	limitertest.Benchmark(b, func(b *testing.B) ratelimit.Limiter { return newLimiter(b, c, testPrefix(b, c), nil) })
}
