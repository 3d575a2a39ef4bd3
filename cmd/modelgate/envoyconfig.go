package main

import (
	"fmt"

	"modelgate/cmd/modelgate/wiring"
	"modelgate/envoy"
	"modelgate/extproc/config"
)

func runEnvoyConfig(args []string, e env) error {
	cfg, _, version, err := envoyCommand("envoy-config", args, e, cmdHelp{
		synopsis: "modelgate envoy-config --config F [--envoy-version V]",
		about: `Prints the Envoy bootstrap (YAML) generated from a config: the listener on
envoy.listen, the ext_proc filter calling envoy.ext_proc_address, and one
cluster per backend. Run Envoy with it in front of 'modelgate serve'.
It needs Envoy 1.34 or later, and 1.37 or later for models with fallback
(its first lines say which); with --envoy-version it fails when the config
needs what that release lacks.`,
		example: "modelgate envoy-config --config modelgate.yaml > envoy.yaml",
	})
	if err != nil {
		return err
	}
	out, err := bootstrapYAML(cfg, version)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(out)
	return err
}

func bootstrapYAML(cfg *config.Config, version envoy.Version) ([]byte, error) {
	ec := wiring.EnvoyConfig(cfg)
	ec.EnvoyVersion = version
	b, err := envoy.Bootstrap(ec)
	if err != nil {
		return nil, fmt.Errorf("generating the Envoy bootstrap: %w", err)
	}
	return envoy.MarshalYAML(b)
}

func runValidate(args []string, e env) error {
	cfg, path, version, err := envoyCommand("validate", args, e, cmdHelp{
		synopsis: "modelgate validate --config F [--envoy-version V]",
		about: `Checks a config and the Envoy bootstrap generated from it. Every problem is
reported at once, one a line, each with its location (such as
models[0].deployments[1].backend); a misspelt key gets a "did you mean".
With --envoy-version it also checks that this Envoy release runs the
bootstrap (models with fallback need 1.37 or later). Exits 0 and prints
"ok" when there are none.`,
		example: "modelgate validate --config modelgate.yaml --envoy-version 1.37",
	})
	if err != nil {
		return err
	}
	out, err := bootstrapYAML(cfg, version)
	if err != nil {
		return err
	}
	b, err := envoy.LoadYAML(out)
	if err != nil {
		return fmt.Errorf("the generated Envoy bootstrap is invalid: %w", err)
	}
	fmt.Fprintf(e.stdout, "%s: ok (%d backends, %d models; needs Envoy %v or later)\n", path, len(cfg.Backends), len(cfg.Models),
		envoy.NeedsVersion(b))
	return nil
}

// envoyCommand parses the flags of a command that takes --config and
// --envoy-version, and loads the config.
func envoyCommand(name string, args []string, e env, h cmdHelp) (*config.Config, string, envoy.Version, error) {
	c := newCommand(name, e, h)
	path := c.String("config", "", "`F` the configuration file (required)")
	version := c.String("envoy-version", "", "`V` the Envoy release that will run the bootstrap, such as 1.36 (default: 1.37 or later)")
	if err := c.parse(args); err != nil {
		return nil, "", envoy.Version{}, err
	}
	if err := c.require("config", *path); err != nil {
		return nil, "", envoy.Version{}, err
	}
	if err := c.noArgs(); err != nil {
		return nil, "", envoy.Version{}, err
	}
	var v envoy.Version
	if *version != "" {
		var err error
		if v, err = envoy.ParseVersion(*version); err != nil {
			return nil, "", v, c.usageError("--envoy-version: %v", err)
		}
	}
	cfg, err := loadConfig(*path)
	return cfg, *path, v, err
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return nil, fmt.Errorf("--config is required")
	}
	return config.Load(path)
}
