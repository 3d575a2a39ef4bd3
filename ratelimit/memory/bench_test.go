package memory_test

import (
	"testing"

	"modelgate/ratelimit"
	"modelgate/ratelimit/limitertest"
	"modelgate/ratelimit/memory"
)

func BenchmarkAdmit(b *testing.B) {
	limitertest.Benchmark(b, func(*testing.B) ratelimit.Limiter { return memory.New(memory.Config{}) })
}
