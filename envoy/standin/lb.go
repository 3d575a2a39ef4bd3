package standin

import (
	"crypto/tls"
	"net/http"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// host is one endpoint of a cluster (Envoy's HostImpl). Everything after
// transport is guarded by the cluster's balancer lock.
type host struct {
	addr string // host:port, dialed as it is
	// hostname is what auto_host_rewrite and auto_host_sni use: the
	// endpoint's hostname, or for a DNS cluster its DNS name when that is
	// empty (strict_dns_cluster.cc, ResolveTarget).
	hostname string
	metadata *corev3.Metadata // the LbEndpoint's metadata (xds.upstream_host_metadata)
	weight   uint64           // load_balancing_weight, default 1
	priority int
	// tls is the host's transport socket: the cluster's, or the
	// transport_socket_matches entry its metadata matches; autoSNI is its
	// auto_host_sni.
	tls       *tls.Config
	autoSNI   bool
	transport *http.Transport
	active    atomic.Int64 // requests in flight, for LEAST_REQUEST (rq_active)

	om outlierMonitor
}

type lbPolicy int

const (
	roundRobin lbPolicy = iota
	leastRequest
)

// balancer is a cluster's load balancer, shared by every request of the
// Proxy (load_balancer_impl.cc: LoadBalancerBase, ZoneAwareLoadBalancerBase,
// EdfLoadBalancerBase, RoundRobin and LeastRequest): priorities with the
// overprovisioning factor, the panic threshold, and per-priority host
// picking. Locality weights are ignored, as Envoy does without
// locality_weighted_lb_config (which is refused).
type balancer struct {
	mu         sync.Mutex
	priorities [][]*host
	hosts      []*host
	policy     lbPolicy
	// overprovisioning is the factor in percent (Envoy's default 140).
	overprovisioning uint64
	// panicThreshold is healthy_panic_threshold in percent (default 50).
	panicThreshold uint64
	od             *detector // nil without outlier detection

	clock  Clock
	random func() uint64

	version uint64 // bumped when a host is ejected or returns
	sources map[hostSource]*pickState
}

// hostSource is Envoy's HostsSource: a priority's healthy hosts, or all
// its hosts in panic.
type hostSource struct {
	priority int
	all      bool
}

// pickState is a source's round-robin index or EDF schedule, rebuilt when
// the host set changes (EdfLoadBalancerBase::refresh).
type pickState struct {
	version uint64
	rr      uint64
	edf     *edf
}

// lbContext is the router's side of a pick (router.h, Filter as
// LoadBalancerContext): on a retry, previous_hosts may reject a host and
// previous_priorities may change the priority load.
type lbContext interface {
	isRetry() bool
	selectAnother(h *host) bool
	hostSelectionMaxAttempts() int
	priorityLoad(b *balancer, original []uint32) []uint32
}

// healthy reports whether a host takes traffic outside panic: not ejected
// by outlier detection (the only health the stand-in's clusters have).
func (h *host) healthy() bool { return !h.om.ejected }

// availability is a priority's health in percent: healthy hosts over all,
// times the overprovisioning factor, capped at 100
// (recalculatePerPriorityState; previous_priorities uses the same).
func (b *balancer) availability(p int) uint32 {
	hs := b.priorities[p]
	if len(hs) == 0 {
		return 0
	}
	healthy := 0
	for _, h := range hs {
		if h.healthy() {
			healthy++
		}
	}
	return uint32(min(100, b.overprovisioning*uint64(healthy)/uint64(len(hs))))
}

// load is the per-priority load and panic state now (recalculatePerPriority-
// State, recalculatePerPriorityPanic, recalculateLoadInTotalPanic).
func (b *balancer) load() (load []uint32, panic []bool) {
	n := len(b.priorities)
	load, panic = make([]uint32, n), make([]bool, n)
	health := make([]uint32, n)
	var total uint32
	for p := range n {
		health[p] = b.availability(p)
		total += health[p]
	}
	total = min(total, 100)
	if total == 0 {
		if b.panicThreshold == 0 {
			// Panic disabled and nothing available: P0 gets the load and
			// no host is found there.
			load[0] = 100
			return load, panic
		}
	} else {
		load = distributeLoad(health, total)
	}
	allPanic := true
	for p := range n {
		panic[p] = total != 100 && b.inPanic(p)
		allPanic = allPanic && panic[p]
	}
	if allPanic {
		load = b.totalPanicLoad()
	}
	return load, panic
}

// distributeLoad gives each priority in order as much of 100 as its
// availability allows, the rounding rest to the first available one.
func distributeLoad(health []uint32, total uint32) []uint32 {
	load := make([]uint32, len(health))
	left := uint32(100)
	first := -1
	for p, h := range health {
		if first < 0 && h > 0 {
			first = p
		}
		load[p] = min(left, h*100/total)
		left -= load[p]
	}
	if left > 0 && first >= 0 {
		load[first] += left
	}
	return load
}

// inPanic: healthy hosts in percent below the panic threshold
// (isHostSetInPanic).
func (b *balancer) inPanic(p int) bool {
	hs := b.priorities[p]
	healthy := 0
	for _, h := range hs {
		if h.healthy() {
			healthy++
		}
	}
	pct := uint64(0)
	if len(hs) > 0 {
		pct = 100 * uint64(healthy) / uint64(len(hs))
	}
	return pct < b.panicThreshold
}

// totalPanicLoad splits the load by host count over all priorities.
func (b *balancer) totalPanicLoad() []uint32 {
	load := make([]uint32, len(b.priorities))
	total := len(b.hosts)
	if total == 0 {
		load[0] = 100
		return load
	}
	left := uint32(100)
	first := -1
	for p, hs := range b.priorities {
		if first < 0 && len(hs) > 0 {
			first = p
		}
		load[p] = uint32(100 * len(hs) / total)
		left -= load[p]
	}
	load[first] += left
	return load
}

// choosePriority maps a random number onto the load (choosePriority:
// hash % 100 + 1 against the cumulative load).
func choosePriority(r uint64, load []uint32) int {
	v := uint32(r%100 + 1)
	var sum uint32
	for p, l := range load {
		sum += l
		if v <= sum {
			return p
		}
	}
	return 0
}

// choose picks a host for an attempt (LoadBalancerBase::chooseHost): on a
// retry up to host_selection_retry_max_attempts more picks while the
// retry host predicate rejects the host, then the last pick anyway. nil
// is "no healthy upstream".
func (b *balancer) choose(ctx lbContext) *host {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep()
	attempts := 2 // hostSelectionRetryCount() is 1 on the first attempt
	if ctx != nil && ctx.isRetry() {
		attempts = ctx.hostSelectionMaxAttempts() + 1
	}
	var h *host
	for range attempts {
		h = b.chooseOnce(ctx)
		if h == nil || ctx == nil || !ctx.isRetry() || !ctx.selectAnother(h) {
			return h
		}
	}
	return h
}

func (b *balancer) chooseOnce(ctx lbContext) *host {
	load, panic := b.load()
	r := b.random()
	if ctx != nil && ctx.isRetry() {
		load = ctx.priorityLoad(b, load)
	}
	p := choosePriority(r, load)
	src := hostSource{priority: p, all: panic[p]}
	var hs []*host
	for _, h := range b.priorities[p] {
		if src.all || h.healthy() {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		return nil
	}
	return b.pick(src, hs)
}

// pick chooses within a source: with equal weights round robin or least
// request (two random choices, or a full scan when there are no more
// hosts than choices); with unequal weights an EDF schedule, weighted by
// weight/(active+1) for least request (active_request_bias 1.0).
func (b *balancer) pick(src hostSource, hs []*host) *host {
	st := b.sources[src]
	if st == nil || st.version != b.version {
		st = &pickState{version: b.version, rr: b.random()}
		b.sources[src] = st
	}
	equal := true
	for _, h := range hs[1:] {
		equal = equal && h.weight == hs[0].weight
	}
	if !equal {
		if st.edf == nil {
			st.edf = newEDF(hs, b.weightOf, b.random())
		}
		return st.edf.pickAndAdd(b.weightOf)
	}
	if b.policy == roundRobin {
		h := hs[st.rr%uint64(len(hs))]
		st.rr++
		return h
	}
	const choices = 2
	if len(hs) <= choices {
		return b.fullScan(hs)
	}
	var best *host
	for range choices {
		h := hs[b.random()%uint64(len(hs))]
		if best == nil || h.active.Load() < best.active.Load() {
			best = h
		}
	}
	return best
}

// fullScan is unweightedHostPickFullScan: the fewest active requests, ties
// broken by reservoir sampling.
func (b *balancer) fullScan(hs []*host) *host {
	var best *host
	tied := uint64(0)
	for _, h := range hs {
		switch {
		case best == nil || h.active.Load() < best.active.Load():
			best, tied = h, 1
		case h.active.Load() == best.active.Load():
			tied++
			if b.random()%tied == 0 {
				best = h
			}
		}
	}
	return best
}

func (b *balancer) weightOf(h *host) float64 {
	if b.policy == leastRequest {
		return float64(h.weight) / float64(h.active.Load()+1)
	}
	return float64(h.weight)
}

// edf is Envoy's EdfScheduler: the entry with the earliest deadline is
// picked and added back with deadline now + 1/weight.
type edf struct {
	now     float64
	entries []edfEntry
	seq     uint64
}

type edfEntry struct {
	deadline float64
	seq      uint64 // insertion order breaks ties
	h        *host
}

func newEDF(hs []*host, weight func(*host) float64, r uint64) *edf {
	e := &edf{}
	for _, h := range hs {
		e.add(h, weight(h))
	}
	// Envoy starts each schedule at a random point (createWithPicks).
	for range r % uint64(len(hs)) {
		e.pickAndAdd(weight)
	}
	return e
}

func (e *edf) add(h *host, w float64) {
	e.seq++
	e.entries = append(e.entries, edfEntry{deadline: e.now + 1/w, seq: e.seq, h: h})
}

func (e *edf) pickAndAdd(weight func(*host) float64) *host {
	best := 0
	for i, en := range e.entries {
		b := e.entries[best]
		if en.deadline < b.deadline || en.deadline == b.deadline && en.seq < b.seq {
			best = i
		}
	}
	en := e.entries[best]
	e.entries = append(e.entries[:best], e.entries[best+1:]...)
	e.now = en.deadline
	e.add(en.h, weight(en.h))
	return en.h
}

// sweep runs the outlier detector's interval sweeps that are due.
func (b *balancer) sweep() {
	if b.od != nil && b.od.sweepTo(b.clock.Now()) {
		b.version++
	}
}

// report passes an attempt's outcome to the outlier detector
// (router.cc: putHttpResponseCode with the status after the upstream
// filters, putResult for resets, timeouts and a ready connection).
func (b *balancer) report(h *host, r outlierResult, code int) {
	if b.od == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep()
	if b.od.put(h, r, code, b.clock.Now()) {
		b.version++
	}
}
