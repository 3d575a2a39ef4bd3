package main

import "runtime/debug"

// gcPercent is the gateway's GOGC unless the environment sets one. Its
// live heap is a few MiB and every message allocates, so at Go's default
// of 100 it collects dozens of times a second, each collection with a
// fixed cost; 200 halves their number for a few MiB more heap (about a
// tenth of the ext_proc server's CPU per buffered exchange in
// extprocbench). Deployments bound the heap with GOMEMLIMIT, which the
// Kubernetes manifests and the chart set from the memory limit.
const gcPercent = 200

// tuneGC sets gcPercent unless getenv has a GOGC, which the runtime
// has already taken.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}
