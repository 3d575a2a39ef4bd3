package main

import (
	"testing"
	"time"

	"modelgate/extproc"
	"modelgate/extproc/config"
)

// The config file's defaults are written in extproc/config; the ext_proc
// server keeps zero-value fallbacks of its own for callers that set
// nothing (its tests, extproctest). They must be the same numbers, or the
// gateway would behave differently run from a file than embedded.
func TestWiringDefaultsAgree(t *testing.T) {
	for _, tc := range []struct {
		name        string
		config, srv any
	}{
		{"max request body", int64(config.DefaultMaxRequestBodyBytes), int64(extproc.DefaultMaxRequestBodyBytes)},
		{"max audio", int64(config.DefaultMaxAudioBytes), int64(extproc.DefaultMaxAudioBodyBytes)},
		{"image URL TTL", time.Duration(config.DefaultImageURLTTL), time.Duration(extproc.DefaultImageURLTTL)},
		{"response retention", time.Duration(config.DefaultResponseRetention), time.Duration(extproc.DefaultResponseRetention)},
		{"currency", config.DefaultCurrency, extproc.DefaultCurrency},
	} {
		if tc.config != tc.srv {
			t.Errorf("%s: config's default %v, the server's %v", tc.name, tc.config, tc.srv)
		}
	}
}
