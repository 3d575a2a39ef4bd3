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
	if t := cfg.Observability.Tracing; t.Envoy {
		out.Tracing = envoy.Tracing{Collector: t.collectorAddress(), ServiceName: t.ServiceName + "-envoy"}
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
	for _, m := range cfg.Models {
		if m.Fallback != nil {
			out.Fallbacks = append(out.Fallbacks, cfg.envoyFallback(m))
		}
	}
	return out
}

// envoyFallback is a model with fallback as Envoy serves it. Its attempts
// are bounded by the model's timeouts, else those of its first deployment's
// backend.
func (cfg *Config) envoyFallback(m Model) envoy.Fallback {
	f := m.Fallback.Or(cfg.Fallback)
	out := envoy.Fallback{Model: m.ID,
		Retry: envoy.Retry{Retries: uint32(f.Retries), MaxRetryAfter: f.MaxRetryAfter.Duration, BudgetPercent: f.RetryBudgetPercent},
		Outlier: envoy.Outlier{Consecutive: uint32(f.Outlier.Consecutive), Interval: f.Outlier.Interval.Duration,
			BaseEjection: f.Outlier.BaseEjection.Duration},
	}
	for _, c := range f.RetryOn {
		out.Retry.On = append(out.Retry.On, envoy.RetryCondition(c))
	}
	t := m.Timeouts
	for i, d := range m.Deployments {
		w := uint32(max(d.Weight, 0))
		out.Deployments = append(out.Deployments, envoy.Deployment{Backend: d.Backend, Priority: uint32(d.Priority), Weight: w})
		if i == 0 {
			for _, b := range cfg.Backends {
				if b.Name == d.Backend {
					t = t.Or(b.Timeouts)
				}
			}
		}
	}
	out.Timeouts = envoyTimeouts(t)
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
