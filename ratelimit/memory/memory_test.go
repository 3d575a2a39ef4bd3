package memory_test

import (
	"testing"
	"time"

	"modelgate/ratelimit"
	"modelgate/ratelimit/limitertest"
	"modelgate/ratelimit/memory"
)

func TestConformance(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, now func() time.Time) ratelimit.Limiter {
		return memory.New(memory.Config{Now: now})
	})
}

func TestSpenderConformance(t *testing.T) {
	limitertest.RunSpender(t, func(t *testing.T) ratelimit.Spender { return memory.NewSpender() })
}

func TestSeedingConformance(t *testing.T) {
	limitertest.RunSeeding(t, func(t *testing.T) (ratelimit.Seedable, func() ratelimit.Seedable) {
		// A restart is a new process: a new Spender, with no counters.
		return memory.NewSpender(), func() ratelimit.Seedable { return memory.NewSpender() }
	})
}

// TestReconcilerConformance: a Reconciler is a Spender like any other.
func TestReconcilerConformance(t *testing.T) {
	limitertest.RunSpender(t, func(t *testing.T) ratelimit.Spender {
		r, err := ratelimit.NewReconciler(memory.NewSpender(), ratelimit.ReconcilerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
}

func TestReconcilingConformance(t *testing.T) {
	limitertest.RunReconciling(t, func(t *testing.T) (ratelimit.Spender, func(bool)) {
		f := &limitertest.Failing{Spender: memory.NewSpender()}
		return f, f.Fail.Store
	})
}
