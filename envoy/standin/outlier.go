package standin

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// outlierResult is what the router reports besides response codes
// (upstream/outlier_detection.h, Result).
type outlierResult int

const (
	resultHTTP           outlierResult = iota // a response, with its status after the upstream filters
	resultConnectFailed                       // LocalOriginConnectFailed: every reset but overflow
	resultTimeout                             // LocalOriginTimeout, with the router's 504
	resultConnectSuccess                      // LocalOriginConnectSuccess: the pool is ready
)

// ejection types (data/cluster/v3 OutlierEjectionType) the stand-in runs.
type ejectionType int

const (
	consecutive5xx ejectionType = iota
	consecutiveGatewayFailure
	consecutiveLocalOriginFailure
)

// outlierConfig is the cluster's outlier_detection with Envoy's defaults
// (outlier_detection_impl.cc, DetectorConfig): durations in whole
// milliseconds.
type outlierConfig struct {
	consecutive5xx, consecutiveGateway, consecutiveLocal           uint64
	enforcing5xx, enforcingGateway, enforcingLocal                 uint64
	interval, baseEjection, maxEjection, maxJitter                 time.Duration
	maxEjectionPercent                                             uint64
	alwaysEjectOne, split                                          bool
	successRateMinHosts, enforcingSuccessRate, enforcingLocalRate  uint64
	failurePctMinHosts, enforcingFailurePct, enforcingFailureLocal uint64
}

func compileOutlier(o *clusterv3.OutlierDetection) outlierConfig {
	u := func(v *wrapperspb.UInt32Value, def uint64) uint64 {
		if v == nil {
			return def
		}
		return uint64(v.GetValue())
	}
	ms := func(d *durationpb.Duration, def time.Duration) time.Duration {
		if d == nil {
			return def
		}
		return d.AsDuration().Truncate(time.Millisecond)
	}
	c := outlierConfig{
		consecutive5xx:        u(o.GetConsecutive_5Xx(), 5),
		consecutiveGateway:    u(o.GetConsecutiveGatewayFailure(), 5),
		consecutiveLocal:      u(o.GetConsecutiveLocalOriginFailure(), 5),
		enforcing5xx:          u(o.GetEnforcingConsecutive_5Xx(), 100),
		enforcingGateway:      u(o.GetEnforcingConsecutiveGatewayFailure(), 0),
		enforcingLocal:        u(o.GetEnforcingConsecutiveLocalOriginFailure(), 100),
		interval:              ms(o.GetInterval(), 10*time.Second),
		baseEjection:          ms(o.GetBaseEjectionTime(), 30*time.Second),
		maxJitter:             ms(o.GetMaxEjectionTimeJitter(), 0),
		maxEjectionPercent:    min(100, u(o.GetMaxEjectionPercent(), 10)),
		alwaysEjectOne:        o.GetAlwaysEjectOneHost().GetValue(),
		split:                 o.GetSplitExternalLocalOriginErrors(),
		successRateMinHosts:   u(o.GetSuccessRateMinimumHosts(), 5),
		enforcingSuccessRate:  u(o.GetEnforcingSuccessRate(), 100),
		enforcingLocalRate:    u(o.GetEnforcingLocalOriginSuccessRate(), 100),
		failurePctMinHosts:    u(o.GetFailurePercentageMinimumHosts(), 5),
		enforcingFailurePct:   u(o.GetEnforcingFailurePercentage(), 0),
		enforcingFailureLocal: u(o.GetEnforcingFailurePercentageLocalOrigin(), 0),
	}
	// max_ejection_time defaults to 300s or base_ejection_time, whichever
	// is larger.
	c.maxEjection = ms(o.GetMaxEjectionTime(), max(300*time.Second, c.baseEjection))
	return c
}

// outlierMonitor is a host's DetectorHostMonitorImpl.
type outlierMonitor struct {
	c5xx, cGateway, cLocal uint64
	ejected                bool
	ejectedAt              time.Time
	backoff                uint64 // ejectTimeBackoff: the multiplier of base_ejection_time
	jitter                 time.Duration
	unejectedAt            time.Time
	unejectedOnce          bool
	ejections              uint64
}

// detector is a cluster's DetectorImpl for consecutive errors. Ejections
// happen at the Nth error, inline (Envoy posts them to the main thread);
// returns happen at interval sweeps, which the stand-in runs lazily at the
// times Envoy's interval timer would have fired: creation plus whole
// intervals.
type detector struct {
	cfg       outlierConfig
	hosts     []*host
	nextSweep time.Time
	active    int // ejections_active
	random    func() uint64
}

// sweepTo runs every sweep due by now; true if a host returned.
func (d *detector) sweepTo(now time.Time) bool {
	changed := false
	for !d.nextSweep.After(now) {
		if d.idle() { // nothing for sweeps to do: skip to the last one due
			n := now.Sub(d.nextSweep) / d.cfg.interval
			d.nextSweep = d.nextSweep.Add((n + 1) * d.cfg.interval)
			break
		}
		changed = d.sweep(d.nextSweep) || changed
		d.nextSweep = d.nextSweep.Add(d.cfg.interval)
	}
	return changed
}

func (d *detector) idle() bool {
	for _, h := range d.hosts {
		if h.om.ejected || h.om.backoff > 0 {
			return false
		}
	}
	return true
}

// sweep is onIntervalTimer: hosts whose ejection time (base × backoff,
// capped at max_ejection_time, plus jitter) has passed return; hosts that
// stayed in for an interval since their return get their backoff reduced.
func (d *detector) sweep(now time.Time) bool {
	changed := false
	for _, h := range d.hosts {
		m := &h.om
		if m.ejected && min(d.cfg.baseEjection*time.Duration(m.backoff), d.cfg.maxEjection)+m.jitter <= now.Sub(m.ejectedAt) {
			d.active--
			m.ejected = false
			m.c5xx, m.cGateway, m.cLocal = 0, 0, 0
			m.unejectedAt, m.unejectedOnce = now, true
			changed = true
		}
	}
	for _, h := range d.hosts {
		m := &h.om
		if !m.ejected && m.unejectedOnce && now.Sub(m.unejectedAt) >= d.cfg.interval && m.backoff > 0 {
			m.backoff--
		}
	}
	return changed
}

// put records an attempt's outcome; true if the host was ejected.
// Without split_external_local_origin_errors local-origin results count as
// 503 (connect failure) or the router's 504 (timeout); with it they count
// toward consecutive_local_origin_failure only (putResult*Split).
func (d *detector) put(h *host, r outlierResult, code int, now time.Time) bool {
	m := &h.om
	switch {
	case r == resultHTTP:
		return d.putHTTP(h, code, now)
	case r == resultConnectSuccess:
		if d.cfg.split {
			m.cLocal = 0
		}
		return false
	case !d.cfg.split && r == resultConnectFailed:
		return d.putHTTP(h, 503, now)
	case !d.cfg.split: // timeout
		return d.putHTTP(h, code, now)
	}
	m.cLocal++
	if m.cLocal == d.cfg.consecutiveLocal {
		return d.consecutiveError(h, consecutiveLocalOriginFailure, now)
	}
	return false
}

// putHTTP is putHttpResponseCode: gateway errors (502, 503, 504) and any
// 5xx count up; the Nth (exactly, ==) triggers; anything else resets both.
func (d *detector) putHTTP(h *host, code int, now time.Time) bool {
	m := &h.om
	if code < 500 || code > 599 {
		m.c5xx, m.cGateway = 0, 0
		return false
	}
	ejected := false
	if code >= 502 && code <= 504 {
		m.cGateway++
		if m.cGateway == d.cfg.consecutiveGateway {
			ejected = d.consecutiveError(h, consecutiveGatewayFailure, now)
		}
	} else {
		m.cGateway = 0
	}
	m.c5xx++
	if m.c5xx == d.cfg.consecutive5xx {
		ejected = d.consecutiveError(h, consecutive5xx, now) || ejected
	}
	return ejected
}

// consecutiveError is onConsecutiveErrorWorker: an ejected host is left
// alone; otherwise ejectHost, then the counter of that kind restarts.
func (d *detector) consecutiveError(h *host, t ejectionType, now time.Time) bool {
	if h.om.ejected {
		return false
	}
	ejected := d.eject(h, t, now)
	switch t {
	case consecutive5xx:
		h.om.c5xx = 0
	case consecutiveGatewayFailure:
		h.om.cGateway = 0
	case consecutiveLocalOriginFailure:
		h.om.cLocal = 0
	}
	return ejected
}

// eject is ejectHost: within max_ejection_percent of the cluster's hosts
// (or the first ejection with always_eject_one_host), and then only with
// the enforcing percentage's chance.
func (d *detector) eject(h *host, t ejectionType, now time.Time) bool {
	pct := 100 * float64(d.active+1) / float64(len(d.hosts))
	should := pct <= float64(d.cfg.maxEjectionPercent)
	if d.cfg.alwaysEjectOne {
		should = should || d.active == 0
	}
	enforcing := map[ejectionType]uint64{consecutive5xx: d.cfg.enforcing5xx,
		consecutiveGatewayFailure: d.cfg.enforcingGateway, consecutiveLocalOriginFailure: d.cfg.enforcingLocal}[t]
	if !should || d.random()%100 >= enforcing { // runtime featureEnabled
		return false
	}
	m := &h.om
	d.active++
	m.ejected, m.ejectedAt = true, now
	m.ejections++
	m.jitter = time.Duration(d.random()%uint64(d.cfg.maxJitter.Milliseconds()+1)) * time.Millisecond
	if time.Duration(m.backoff)*d.cfg.baseEjection < d.cfg.maxEjection+d.cfg.baseEjection {
		m.backoff++
	}
	return true
}
