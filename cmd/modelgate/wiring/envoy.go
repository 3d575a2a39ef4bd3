package wiring

import (
	"modelgate/envoy"
	"modelgate/extproc/config"
)

// EnvoyConfig is what the Envoy bootstrap of cfg is generated from.
func EnvoyConfig(cfg *config.Config) envoy.Config {
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
		out.Tracing = envoy.Tracing{Collector: t.CollectorAddress(), ServiceName: t.ServiceName + "-envoy"}
	}
	return out
}
