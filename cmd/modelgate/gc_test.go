package main

import (
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	tuneGC(func(string) string { return "" })
	if p := debug.SetGCPercent(50); p != gcPercent {
		t.Errorf("without GOGC the runtime has %d, want %d", p, gcPercent)
	}
	// GOGC=50 in the environment: the runtime took it; tuneGC keeps it.
	tuneGC(func(k string) string { return map[string]string{"GOGC": "50"}[k] })
	if p := debug.SetGCPercent(100); p != 50 {
		t.Errorf("with GOGC=50 the runtime has %d, want 50", p)
	}
}
