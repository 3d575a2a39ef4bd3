// Command modelgate is the LLM gateway: an Envoy external processor that
// speaks the OpenAI API to clients and each provider's API upstream.
//
// Subcommands:
//
//	modelgate serve --config F          the ext_proc gRPC server and admin endpoint
//	modelgate dev [flags]               everything in one process, no Docker, no keys
//	modelgate keys create|disable|revoke|list --config F ...
//	modelgate envoy-config --config F   print the Envoy bootstrap
//	modelgate validate --config F       report every problem in a config
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], env{getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "modelgate:", err)
		}
		os.Exit(2)
	}
}

// env is what a subcommand may use of the outside world; tests fill it.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	// ready, when set, is told the addresses a dev gateway listens on.
	ready func(devAddrs)
}

const usage = `usage: modelgate <command> [flags]

commands:
  serve         run the ext_proc gRPC server and the admin endpoint (production)
  dev           run gateway, Envoy stand-in and mock provider in one process
  keys          create, list, disable or revoke API keys
  envoy-config  print the Envoy bootstrap generated from a config
  validate      report every problem in a config
  version       print the version this binary was built from
`

func run(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return flag.ErrHelp
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, rest, e)
	case "dev":
		return runDev(ctx, rest, e)
	case "keys":
		return runKeys(ctx, rest, e)
	case "envoy-config":
		return runEnvoyConfig(rest, e)
	case "validate":
		return runValidate(rest, e)
	case "version", "--version":
		fmt.Fprintln(e.stdout, "modelgate", version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, usage)
		return nil
	}
	fmt.Fprint(e.stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// version is the module version and VCS revision the binary was built
// from, as Go records them: "(devel)" for a build from a checkout.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += " (modified)"
			}
		}
	}
	return v
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name string, e env) *flag.FlagSet {
	fs := flag.NewFlagSet("modelgate "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}
