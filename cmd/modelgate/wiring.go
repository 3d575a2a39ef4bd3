package main

import (
	"fmt"

	"go.uber.org/zap"

	"modelgate/cmd/modelgate/config"
	"modelgate/envoy"
	"modelgate/extproc"
)

// envoyBufferLimit is Envoy's per-connection buffer limit for a config. It
// is larger than the request body limit so that the gateway, not Envoy,
// answers oversized requests (with an OpenAI-shaped 413), and large enough
// for buffered responses such as base64 images.
func envoyBufferLimit(cfg *config.Config) int64 {
	return max(cfg.Limits.MaxRequestBodyBytes+1<<20, 32<<20)
}

// grpcMaxMessage is the ext_proc server's receive limit: a buffered body of
// Envoy's buffer limit plus the headers around it (gRPC's default 4 MiB
// would fail larger bodies; ENVOY_EXTPROC.md §4).
func grpcMaxMessage(cfg *config.Config) int {
	return int(envoyBufferLimit(cfg) + 1<<20)
}

// extprocConfig resolves credentials from the environment.
func extprocConfig(cfg *config.Config, getenv func(string) string, log *zap.Logger) (extproc.Config, error) {
	out := extproc.Config{MaxRequestBodyBytes: cfg.Limits.MaxRequestBodyBytes, Logger: log}
	for _, b := range cfg.Backends {
		key := ""
		if b.APIKeyEnv != "" {
			if key = getenv(b.APIKeyEnv); key == "" {
				return extproc.Config{}, fmt.Errorf("backend %q: environment variable %s is not set", b.Name, b.APIKeyEnv)
			}
		}
		out.Backends = append(out.Backends, extproc.Backend{Name: b.Name, Provider: b.Provider, BasePath: b.BasePath(),
			APIKey: key, APIVersion: b.APIVersion})
	}
	for _, m := range cfg.Models {
		em := extproc.Model{ID: m.ID, OwnedBy: m.OwnedBy, Created: m.Created}
		for _, d := range m.Deployments {
			em.Deployments = append(em.Deployments, extproc.Deployment{Backend: d.Backend, Model: d.Model, Weight: d.Weight})
		}
		out.Models = append(out.Models, em)
	}
	return out, nil
}

// envoyConfig is what the Envoy bootstrap is generated from.
func envoyConfig(cfg *config.Config) envoy.Config {
	out := envoy.Config{
		Listen:           cfg.Envoy.Listen,
		ExtProcAddress:   cfg.Envoy.ExtProcAddress,
		MessageTimeout:   cfg.Envoy.MessageTimeout.Duration,
		BufferLimitBytes: uint32(envoyBufferLimit(cfg)),
	}
	for _, b := range cfg.Backends {
		out.Backends = append(out.Backends, envoy.Backend{Name: b.Name, BaseURL: b.BaseURL})
	}
	return out
}
