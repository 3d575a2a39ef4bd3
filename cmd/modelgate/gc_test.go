package main

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, gcPercent},              // nothing measured yet
		{4 << 20, 700},              // 4 MiB live: the goal is the 32 MiB floor
		{8 << 20, 300},              // 8 MiB: 32
		{(32 << 20) / 3, gcPercent}, // 10.7 MiB: 200% more is the floor
		{16 << 20, gcPercent},       // past that, gcPercent
		{1 << 30, gcPercent},
	} {
		if got := gcPercentFor(c.live, heapFloor, gcPercent); got != c.want {
			t.Errorf("live %d: GOGC %d, want %d", c.live, got, c.want)
		}
	}
}

// Without GOGC in the environment the heap may grow to the floor before
// a collection: after one, the runtime's goal for the next is the floor.
func TestTuneGCKeepsTheFloor(t *testing.T) {
	before := debug.SetGCPercent(100)
	stop := tuneGC(func(string) string { return "" })
	t.Cleanup(func() {
		stop()
		debug.SetGCPercent(before)
	})
	goal := []rtmetrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC() // the tuner runs after it, on the cleanup goroutine
		time.Sleep(10 * time.Millisecond)
		rtmetrics.Read(goal)
		if g := goal[0].Value.Uint64(); g >= heapFloor*9/10 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("heap goal %d after collections, want about %d", g, heapFloor)
		}
	}
	if p := debug.SetGCPercent(-1); p < gcPercent {
		t.Errorf("GOGC %d, want at least %d", p, gcPercent)
	}
	debug.SetGCPercent(100)
}

// GOGC in the environment: the runtime took it, and tuneGC keeps it.
func TestTuneGCLeavesGOGC(t *testing.T) {
	before := debug.SetGCPercent(50)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	stop := tuneGC(func(k string) string { return map[string]string{"GOGC": "50"}[k] })
	defer stop()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p := debug.SetGCPercent(100); p != 50 {
		t.Errorf("with GOGC=50 the runtime has %d, want 50", p)
	}
}
