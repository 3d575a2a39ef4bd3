package standin

import (
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// testBalancer has hosts[p] hosts at priority p, the first ejected[p] of
// them ejected.
func testBalancer(hosts, ejected []int, panicThreshold uint64) *balancer {
	b := &balancer{overprovisioning: 140, panicThreshold: panicThreshold, sources: map[hostSource]*pickState{},
		clock: newFakeClock(), random: zeroRandom, policy: leastRequest}
	for p, n := range hosts {
		b.priorities = append(b.priorities, nil)
		for i := range n {
			h := &host{addr: "h", priority: p, weight: 1}
			h.om.ejected = i < ejected[p]
			b.priorities[p] = append(b.priorities[p], h)
			b.hosts = append(b.hosts, h)
		}
	}
	return b
}

// Priority load with the overprovisioning factor 1.4, and panic
// (load_balancer_impl.cc recalculatePerPriorityState,
// recalculatePerPriorityPanic, recalculateLoadInTotalPanic; docs
// load_balancing/overprovisioning and panic_threshold).
func TestPriorityLoad(t *testing.T) {
	for _, tt := range []struct {
		name           string
		hosts, ejected []int
		threshold      uint64
		wantLoad       []uint32
		wantPanic      []bool
	}{
		{"all healthy: P0 takes all", []int{1, 1}, []int{0, 0}, 50, []uint32{100, 0}, []bool{false, false}},
		{"72% of P0 available is still 100%", []int{4, 1}, []int{1, 0}, 50, []uint32{100, 0}, []bool{false, false}},
		{"2 of 3 healthy: 93% / 7%", []int{3, 1}, []int{1, 0}, 50, []uint32{93, 7}, []bool{false, false}},
		{"P0 ejected: all to P1, no panic", []int{1, 1}, []int{1, 0}, 50, []uint32{0, 100}, []bool{false, false}},
		{"everything ejected, threshold 0: P0 gets the load, no panic", []int{1, 1}, []int{1, 1}, 0, []uint32{100, 0}, []bool{false, false}},
		{"everything ejected, default threshold: total panic by host count", []int{1, 3}, []int{1, 3}, 50, []uint32{25, 75}, []bool{true, true}},
		{"one host per priority, partly down: panic below the threshold", []int{2, 2}, []int{2, 1}, 50, []uint32{0, 100}, []bool{true, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			load, panic := testBalancer(tt.hosts, tt.ejected, tt.threshold).load()
			if !slices.Equal(load, tt.wantLoad) || !slices.Equal(panic, tt.wantPanic) {
				t.Errorf("load %v panic %v, want %v %v", load, panic, tt.wantLoad, tt.wantPanic)
			}
		})
	}
	if p := choosePriority(92, []uint32{93, 7}); p != 0 {
		t.Errorf("choosePriority(92) = %d: hash %% 100 + 1 = 93 is still P0", p)
	}
	if p := choosePriority(93, []uint32{93, 7}); p != 1 {
		t.Errorf("choosePriority(93) = %d", p)
	}
}

// LEAST_REQUEST: with no more hosts than choices a full scan picks the
// fewest active requests (unweightedHostPickFullScan); unequal weights use
// the EDF schedule weighted by weight/(active+1) (EdfLoadBalancerBase).
// previous_hosts with host_selection_retry_max_attempts re-picks a tried
// host up to that many times, then takes the last pick
// (LoadBalancerBase::chooseHost).
func TestHostPicking(t *testing.T) {
	b := testBalancer([]int{2}, []int{0}, 50)
	b.priorities[0][0].active.Store(3)
	if h := b.choose(nil); h != b.priorities[0][1] {
		t.Error("least request picked the busier host")
	}
	b = testBalancer([]int{2}, []int{0}, 50)
	b.priorities[0][0].weight = 3
	counts := map[*host]int{}
	for range 400 {
		counts[b.choose(nil)]++
	}
	if c := counts[b.priorities[0][0]]; c < 280 || c > 320 {
		t.Errorf("weight 3 of 4 got %d of 400 picks", c)
	}
	b = testBalancer([]int{2}, []int{0}, 50)
	b.policy = roundRobin
	rs := &retryState{p: &retryPolicy{previousHosts: true, hostSelectionMaxAttempts: 3}, retried: true}
	rs.onHostAttempted(b.priorities[0][0])
	for range 4 {
		if h := b.choose(rs); h != b.priorities[0][1] {
			t.Fatal("previous_hosts: a retry picked the host already tried")
		}
	}
	b = testBalancer([]int{1}, []int{0}, 50)
	rs = &retryState{p: &retryPolicy{previousHosts: true, hostSelectionMaxAttempts: 3}, retried: true}
	rs.onHostAttempted(b.priorities[0][0])
	if h := b.choose(rs); h != b.priorities[0][0] {
		t.Error("with no other host, the last pick is used anyway")
	}
}

// previous_priorities (previous_priorities.cc): every update_frequency
// attempts the tried priorities are excluded; when nothing is left, they
// are forgotten and the load computed over all of them.
func TestPreviousPriorities(t *testing.T) {
	b := testBalancer([]int{1, 1, 1}, []int{0, 0, 0}, 50)
	rs := &retryState{p: &retryPolicy{previousPriorities: 1}, retried: true}
	orig, _ := b.load()
	rs.onHostAttempted(b.priorities[0][0])
	if l := rs.priorityLoad(b, orig); !slices.Equal(l, []uint32{0, 100, 0}) {
		t.Errorf("after P0: %v", l)
	}
	rs.onHostAttempted(b.priorities[1][0])
	if l := rs.priorityLoad(b, orig); !slices.Equal(l, []uint32{0, 0, 100}) {
		t.Errorf("after P0, P1: %v", l)
	}
	rs.onHostAttempted(b.priorities[2][0])
	if l := rs.priorityLoad(b, orig); !slices.Equal(l, []uint32{100, 0, 0}) {
		t.Errorf("after all: %v, want the load over all priorities again", l)
	}
	rs = &retryState{p: &retryPolicy{previousPriorities: 2}, retried: true}
	rs.onHostAttempted(b.priorities[0][0])
	if l := rs.priorityLoad(b, orig); !slices.Equal(l, orig) {
		t.Errorf("update_frequency 2 after one attempt: %v, want the original", l)
	}
}

// Back-off (backoff_strategy.cc JitteredExponentialBackOffStrategy: random
// below an interval that doubles from 25ms up to 250ms;
// JitteredLowerBoundBackOffStrategy: [interval, 1.5 × interval)), the
// retry limit (URX) and max_retries (UO) (retry_state_impl.cc shouldRetry).
func TestRetryDecisions(t *testing.T) {
	c := &cluster{maxRetries: 3}
	max := func() uint64 { return ^uint64(0) }
	rs := &retryState{p: &retryPolicy{baseInterval: 25 * time.Millisecond, maxInterval: 250 * time.Millisecond}, c: c,
		remaining: 10, next: 25 * time.Millisecond, random: max, retryOn: parseRetryOn("5xx")}
	var got []time.Duration
	for range 6 {
		d, wait := rs.shouldRetryReset(resetRemote, true)
		if d != retryYes {
			t.Fatalf("decision %v", d)
		}
		got = append(got, wait)
		rs.release()
	}
	// ^uint64(0) % n is n-1 for these n... within [0, interval).
	for i, limit := range []time.Duration{25, 50, 100, 200, 250, 250} {
		if got[i] >= limit*time.Millisecond {
			t.Errorf("back-off %d = %v, want below %vms", i, got[i], limit)
		}
	}
	rs.random = zeroRandom
	rs.p.resetHeaders = []*routev3.RetryPolicy_ResetHeader{{Name: "Retry-After", Format: routev3.RetryPolicy_SECONDS}}
	rs.p.resetMaxInterval = 300 * time.Second
	rs.statusCodes, rs.retryOn = []uint32{429}, parseRetryOn("retriable-status-codes, bogus")
	if d, wait := rs.shouldRetryHeaders(429, headerMap{{"retry-after", "3"}}); d != retryYes || wait != 3*time.Second {
		t.Errorf("429 Retry-After 3: %v %v", d, wait)
	}
	rs.release()
	if d, _ := rs.shouldRetryHeaders(503, nil); d != retryNo {
		t.Errorf("503 without 5xx: %v", d)
	}
	rs.remaining = 0
	if d, _ := rs.shouldRetryHeaders(429, nil); d != retryLimitExceeded {
		t.Errorf("no retries left: %v", d)
	}
	rs.remaining = 5
	c.retries.Store(3)
	if d, _ := rs.shouldRetryHeaders(429, nil); d != retryOverflow {
		t.Errorf("max_retries reached: %v", d)
	}
	if rs.wouldRetryReset(resetConnectFailure, false) {
		t.Error("a connect failure is not retriable-status-codes")
	}
	rs.retryOn = parseRetryOn("connect-failure")
	if !rs.wouldRetryReset(resetConnectFailure, false) || rs.wouldRetryReset(resetPerTry, true) {
		t.Error("connect-failure retries connect failures only")
	}
}

// Outlier detection details (outlier_detection_impl.cc): max_ejection_percent
// counts the cluster's hosts, always_eject_one_host lets one go anyway;
// the enforcing percentage is a chance; split mode counts local-origin
// failures apart.
func TestOutlierDetails(t *testing.T) {
	mk := func(cfg outlierConfig, n int) *detector {
		d := &detector{cfg: cfg, random: zeroRandom}
		for range n {
			d.hosts = append(d.hosts, &host{})
		}
		return d
	}
	now := time.Now()
	base := outlierConfig{consecutive5xx: 1, consecutiveGateway: 5, consecutiveLocal: 1, enforcing5xx: 100, enforcingLocal: 100,
		interval: time.Second, baseEjection: time.Second, maxEjection: time.Minute, maxEjectionPercent: 10}
	d := mk(base, 2)
	if d.put(d.hosts[0], resultHTTP, 500, now) {
		t.Error("10% of 2 hosts: ejecting one is 50%")
	}
	cfg := base
	cfg.alwaysEjectOne = true
	d = mk(cfg, 2)
	if !d.put(d.hosts[0], resultHTTP, 500, now) || d.put(d.hosts[1], resultHTTP, 500, now) {
		t.Error("always_eject_one_host: the first only")
	}
	cfg = base
	cfg.maxEjectionPercent, cfg.enforcing5xx = 100, 0
	d = mk(cfg, 1)
	if d.put(d.hosts[0], resultHTTP, 500, now) {
		t.Error("enforcing 0 never ejects")
	}
	cfg = base
	cfg.maxEjectionPercent, cfg.consecutive5xx = 100, 2
	d = mk(cfg, 1)
	if d.put(d.hosts[0], resultConnectFailed, 0, now) || !d.put(d.hosts[0], resultTimeout, 504, now) {
		t.Error("without split, a connect failure and a timeout are two 5xx")
	}
	cfg.split = true
	d = mk(cfg, 1)
	if d.put(d.hosts[0], resultConnectFailed, 0, now) != true || d.hosts[0].om.c5xx != 0 {
		t.Error("with split, a connect failure counts toward consecutive_local_origin_failure only")
	}
}

// Metadata as ShortDebugString prints it (text_format.cc, single line, map
// entries sorted), values as evaluateAttributes turns CEL values into
// Struct values.
func TestAttributeRendering(t *testing.T) {
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"z": {Fields: map[string]*structpb.Value{"n": structpb.NewNumberValue(1.5), "l": structpb.NewListValue(&structpb.ListValue{
			Values: []*structpb.Value{structpb.NewBoolValue(true), structpb.NewNullValue()}})}},
		"a": {Fields: map[string]*structpb.Value{"s": structpb.NewStringValue("q\"uo\te\n\u00e9")}},
	}}
	want := `filter_metadata { key: "a" value { fields { key: "s" value { string_value: "q\"uo\te\n\303\251" } } } } ` +
		`filter_metadata { key: "z" value { fields { key: "l" value { list_value { values { bool_value: true } values { null_value: NULL_VALUE } } } } fields { key: "n" value { number_value: 1.5 } } } }`
	if got := shortDebugString(md); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if v := celValue(structpb.NewNumberValue(1e6)); v.GetStringValue() != "1e+06" {
		t.Errorf("a number in metadata prints as %v", v)
	}
}

// A retry_budget replaces max_retries: budget_percent of the requests in
// flight, never below min_retry_concurrency (resource_manager_impl.h,
// RetryBudgetImpl::max).
func TestRetryBudget(t *testing.T) {
	c := &cluster{budget: true, budgetPercent: 20, minRetries: 3, maxRetries: 100}
	c.inFlight.Store(30)
	n := 0
	for c.acquireRetry() {
		n++
	}
	if n != 6 {
		t.Errorf("20%% of 30 in flight allowed %d retries, want 6", n)
	}
	c.retries.Store(0)
	c.inFlight.Store(1)
	n = 0
	for c.acquireRetry() {
		n++
	}
	if n != 3 {
		t.Errorf("with 1 in flight %d retries, want min_retry_concurrency 3", n)
	}
}
