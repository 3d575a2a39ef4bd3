package main

import (
	"fmt"

	"modelgate/cmd/modelgate/config"
	"modelgate/envoy"
)

func runEnvoyConfig(args []string, e env) error {
	cfg, _, err := configOnly("envoy-config", args, e, cmdHelp{
		synopsis: "modelgate envoy-config --config F",
		about: `Prints the Envoy bootstrap (YAML) generated from a config: the listener on
envoy.listen, the ext_proc filter calling envoy.ext_proc_address, and one
cluster per backend. Run Envoy with it in front of 'modelgate serve'.`,
		example: "modelgate envoy-config --config modelgate.yaml > envoy.yaml",
	})
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
	b, err := envoy.Bootstrap(cfg.EnvoyConfig())
	if err != nil {
		return nil, fmt.Errorf("generating the Envoy bootstrap: %w", err)
	}
	return envoy.MarshalYAML(b)
}

func runValidate(args []string, e env) error {
	cfg, path, err := configOnly("validate", args, e, cmdHelp{
		synopsis: "modelgate validate --config F",
		about: `Checks a config and the Envoy bootstrap generated from it. Every problem is
reported at once, one a line, each with its location (such as
models[0].deployments[1].backend); a misspelt key gets a "did you mean".
Exits 0 and prints "ok" when there are none.`,
		example: "modelgate validate --config modelgate.yaml",
	})
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
func configOnly(name string, args []string, e env, h cmdHelp) (*config.Config, string, error) {
	c := newCommand(name, e, h)
	path := c.String("config", "", "`F` the configuration file (required)")
	if err := c.parse(args); err != nil {
		return nil, "", err
	}
	if err := c.require("config", *path); err != nil {
		return nil, "", err
	}
	if err := c.noArgs(); err != nil {
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
