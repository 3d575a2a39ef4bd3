package config

import "modelgate/envoy"

// EnvoyBufferLimit is Envoy's per-connection buffer limit for a config. It
// is larger than the request body limit so that the gateway, not Envoy,
// answers oversized requests (with an OpenAI-shaped 413), and large enough
// for buffered responses such as base64 images.
func (cfg *Config) EnvoyBufferLimit() int64 {
	if cfg.Envoy.BufferLimitBytes > 0 {
		return cfg.Envoy.BufferLimitBytes
	}
	return max(max(cfg.Limits.MaxRequestBodyBytes, cfg.Limits.MaxAudioBytes)+1<<20, 32<<20)
}

// EnvoyConfig is what the Envoy bootstrap is generated from.
func (cfg *Config) EnvoyConfig() envoy.Config {
	out := envoy.Config{
		Listen:           cfg.Envoy.Listen,
		ExtProcAddress:   cfg.Envoy.ExtProcAddress,
		MessageTimeout:   cfg.Envoy.MessageTimeout.Duration,
		RequestTimeout:   cfg.Envoy.RequestTimeout.Duration,
		BufferLimitBytes: uint32(cfg.EnvoyBufferLimit()),
		// The config checked the ranges of these.
		AdminListen:       cfg.Envoy.AdminListen,
		MaxRequests:       uint32(cfg.Envoy.MaxRequestsInFlight),
		AccessLog:         envoy.AccessLog(cfg.Envoy.AccessLog),
		UseRemoteAddress:  cfg.Envoy.UseRemoteAddress,
		XffNumTrustedHops: uint32(cfg.Envoy.XffNumTrustedHops),
	}
	for _, b := range cfg.Backends {
		eb := envoy.Backend{Name: b.Name, BaseURL: b.BaseURL, Timeouts: envoyTimeouts(b.Timeouts)}
		for _, m := range cfg.Models {
			if m.Timeouts == (Timeouts{}) || !servedBy(m, b.Name) {
				continue
			}
			eb.Models = append(eb.Models, envoy.ModelTimeouts{Model: m.ID, Timeouts: envoyTimeouts(m.Timeouts.Or(b.Timeouts))})
		}
		out.Backends = append(out.Backends, eb)
	}
	return out
}

func envoyTimeouts(t Timeouts) envoy.Timeouts {
	return envoy.Timeouts{ResponseHeaders: t.ResponseHeaders.Duration, StreamIdle: t.StreamIdle.Duration}
}

func servedBy(m Model, backend string) bool {
	for _, d := range m.Deployments {
		if d.Backend == backend {
			return true
		}
	}
	return false
}
