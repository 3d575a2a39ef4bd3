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
		Routing:           cfg.Routing(),
	}
	if t := cfg.Observability.Tracing; t.Envoy {
		out.Tracing = envoy.Tracing{Collector: t.collectorAddress(), ServiceName: t.ServiceName + "-envoy"}
	}
	return out
}
