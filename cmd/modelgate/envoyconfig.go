package main

import (
	"fmt"

	"modelgate/cmd/modelgate/config"
	"modelgate/envoy"
)

func runEnvoyConfig(args []string, e env) error {
	cfg, _, err := configOnly("envoy-config", args, e)
	if err != nil {
		return err
	}
	out, err := bootstrapYAML(cfg)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(out)
	return err
}

func bootstrapYAML(cfg *config.Config) ([]byte, error) {
	b, err := envoy.Bootstrap(envoyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("generating the Envoy bootstrap: %w", err)
	}
	return envoy.MarshalYAML(b)
}

func runValidate(args []string, e env) error {
	cfg, path, err := configOnly("validate", args, e)
	if err != nil {
		return err
	}
	out, err := bootstrapYAML(cfg)
	if err != nil {
		return err
	}
	if _, err := envoy.LoadYAML(out); err != nil {
		return fmt.Errorf("the generated Envoy bootstrap is invalid: %w", err)
	}
	fmt.Fprintf(e.stdout, "%s: ok (%d backends, %d models)\n", path, len(cfg.Backends), len(cfg.Models))
	return nil
}

// configOnly parses the flags of a command whose only flag is --config
// and loads that file.
func configOnly(name string, args []string, e env) (*config.Config, string, error) {
	fs := newFlags(name, e)
	path := fs.String("config", "", "configuration file (required)")
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	cfg, err := loadConfig(*path)
	return cfg, *path, err
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return nil, fmt.Errorf("--config is required")
	}
	return config.Load(path)
}
