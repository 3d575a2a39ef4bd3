package envoy

import (
	"fmt"
	"strconv"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// Version is an Envoy release, major.minor: patch releases do not change
// what the bootstrap needs.
type Version struct{ Major, Minor int }

// The releases the bootstrap knows (COMPATIBILITY.md says why).
var (
	// MinVersion is the oldest Envoy that runs the bootstrap.
	MinVersion = Version{1, 34}
	// FallbackVersion is the oldest Envoy that runs a model with
	// fallback: before 1.36 an upstream ext_proc's immediate responses
	// and failures were ignored (ext_proc.cc, sendImmediateResponse:
	// send_immediate_resp_upstream_ignored; envoyproxy/envoy#41231), so
	// an attempt the server refused hung until its per-try timeout and
	// was retried; before 1.37 an upstream filter that paused the
	// response headers, as the upstream ext_proc does, broke retries on
	// 5xx (changelog 1.37.0).
	FallbackVersion = Version{1, 37}
)

// ParseVersion reads "1.36", "v1.36" or "1.36.2".
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(s), "v"), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("envoy version %q: want major.minor, such as 1.37", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("envoy version %q: want major.minor, such as 1.37", s)
		}
		n[i] = v
	}
	return Version{n[0], n[1]}, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less reports whether v is an older release than w.
func (v Version) Less(w Version) bool {
	return v.Major < w.Major || v.Major == w.Major && v.Minor < w.Minor
}

// checkVersion reports what the bootstrap for c needs that Envoy v lacks;
// the zero Version asks for nothing.
func (c Config) checkVersion() []error {
	v := c.EnvoyVersion
	if v == (Version{}) {
		return nil
	}
	if v.Less(MinVersion) {
		return []error{fmt.Errorf("envoy %v: the bootstrap needs Envoy %v or later", v, MinVersion)}
	}
	var errs []error
	for _, m := range c.Routing.Models {
		if m.Fallback != nil && v.Less(FallbackVersion) {
			errs = append(errs, fmt.Errorf("fallback of model %q needs Envoy %v or later, not %v: older releases ignore the "+
				"upstream ext_proc's immediate responses and failures (a refused attempt hangs until its per-try timeout, "+
				"then is retried) and, before 1.37, break retries after an upstream filter paused the response headers",
				m.ID, FallbackVersion, v))
		}
	}
	return errs
}

// NeedsVersion is the oldest Envoy release that runs b: FallbackVersion
// when a cluster has upstream HTTP filters (models with fallback), else
// MinVersion.
func NeedsVersion(b *bootstrapv3.Bootstrap) Version {
	for _, c := range b.GetStaticResources().GetClusters() {
		var o upstreamsv3.HttpProtocolOptions
		if a := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]; a != nil && a.UnmarshalTo(&o) == nil && len(o.GetHttpFilters()) > 0 {
			return FallbackVersion
		}
	}
	return MinVersion
}
