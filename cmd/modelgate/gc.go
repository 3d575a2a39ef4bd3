package main

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync/atomic"
)

// The gateway's garbage collection, unless the environment sets GOGC.
// Its live heap is a few MiB and every message allocates, so at Go's
// default the collector runs dozens of times a second, each run with a
// cost of its own: in extprocbench over a tenth of the ext_proc server's
// CPU per buffered exchange. So the heap may grow to heapFloor before a
// collection, and past that to gcPercent more than the live heap (Go's
// GOGC). With many open streams the live heap is large and gcPercent
// alone decides. Deployments bound the heap with GOMEMLIMIT, which the
// Kubernetes manifests and the chart set from the memory limit, and which
// the runtime keeps to also where the floor would allow more.
const (
	gcPercent = 200
	heapFloor = 32 << 20
)

// tuneGC sets gcPercent and keeps the heap floor unless getenv has a
// GOGC, which the runtime has already taken. stop ends the tuning.
func tuneGC(getenv func(string) string) (stop func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	t := &gcTuner{floor: heapFloor, percent: gcPercent,
		live: []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.tune()
	t.arm()
	return func() { t.stopped.Store(true) }
}

// gcTuner sets the GOGC that lets the heap grow to its floor: after
// every collection, from the live heap it left.
type gcTuner struct {
	floor   uint64
	percent int // the least GOGC it sets
	live    []rtmetrics.Sample
	current int // the GOGC it set last
	stopped atomic.Bool
}

// gcPercentFor is the GOGC whose heap goal for a live heap is the floor,
// or percent if that is more.
func gcPercentFor(live, floor uint64, percent int) int {
	if live == 0 || live >= floor {
		return percent
	}
	return max(percent, int(floor*100/live)-100)
}

func (t *gcTuner) tune() {
	rtmetrics.Read(t.live)
	var live uint64
	if v := t.live[0].Value; v.Kind() == rtmetrics.KindUint64 {
		live = v.Uint64()
	}
	if p := gcPercentFor(live, t.floor, t.percent); p != t.current {
		debug.SetGCPercent(p)
		t.current = p
	}
}

// arm tunes again after the next collection: it frees an object of its
// own, whose cleanup tunes and arms anew.
func (t *gcTuner) arm() {
	s := new(gcSentinel)
	runtime.AddCleanup(s, func(t *gcTuner) {
		if !t.stopped.Load() {
			t.tune()
			t.arm()
		}
	}, t)
}

// gcSentinel holds a pointer, so the allocator never combines it with
// other small objects (whose cleanups then wait for all of them).
type gcSentinel struct{ _ *int }
