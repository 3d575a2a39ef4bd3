package standin

import (
	"fmt"

	"modelgate/envoy"
)

// WithEnvoyVersion makes the stand-in behave as an older Envoy release
// where releases differ in what it implements; "1.37" and later are the
// default. Older releases differ in these:
//   - before 1.36, an ext_proc filter in an upstream filter chain ignores
//     its own immediate responses and failures (ext_proc.cc,
//     sendImmediateResponse returns early, counter
//     send_immediate_resp_upstream_ignored; fixed by envoyproxy/envoy#41231
//     in 1.36.0), and nothing resumes the attempt: it waits for a
//     per-try timeout, which may retry it, or for the route's or the
//     connection manager's timers;
//   - before 1.37, local replies skip the ext_proc filter's response path
//     (runtime guard skip_ext_proc_on_local_reply, the fix of
//     CVE-2025-30157, reverted by envoyproxy/envoy#41769): the ext_proc
//     server never sees Envoy's own replies.
//
// Releases before 1.34 (envoy.MinVersion) are refused.
func WithEnvoyVersion(s string) Option {
	return func(p *Proxy) {
		v, err := envoy.ParseVersion(s)
		switch {
		case err != nil:
			p.optErr = fmt.Errorf("standin: %w", err)
		case v.Major != 1 || v.Less(envoy.MinVersion):
			p.optErr = fmt.Errorf("standin: Envoy %v: 1.34 and later 1.x releases are implemented", v)
		default:
			p.version = v
		}
	}
}

// referenceVersion is the release the stand-in copies by default.
var referenceVersion = envoy.Version{Major: 1, Minor: 37}

// upstreamRepliesIgnored: the release ignores an upstream ext_proc's
// immediate responses and failures.
func (p *Proxy) upstreamRepliesIgnored() bool {
	return p.version.Less(envoy.Version{Major: 1, Minor: 36})
}

// localRepliesSkipExtProc: the release sends local replies straight to
// the client, past the ext_proc filter.
func (p *Proxy) localRepliesSkipExtProc() bool {
	return p.version.Less(envoy.Version{Major: 1, Minor: 37})
}
