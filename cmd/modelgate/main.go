// Command modelgate is the LLM gateway: an Envoy external processor that
// speaks the OpenAI API to clients and each provider's API upstream.
//
// Subcommands:
//
//	modelgate serve --config F          the ext_proc gRPC server and admin endpoint
//	modelgate dev [flags]               everything in one process, no Docker, no keys
//	modelgate keys create|list|disable|enable|revoke --config F ...
//	modelgate envoy-config --config F   print the Envoy bootstrap
//	modelgate validate --config F       report every problem in a config
//	modelgate version                   print the version
//
// Every command prints its flags and an example with --help.
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
	"strings"
	"syscall"
	"text/tabwriter"
)

func main() {
	tuneGC(os.Getenv)
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
  keys          create, list, disable, enable or revoke API keys
  envoy-config  print the Envoy bootstrap generated from a config
  validate      report every problem in a config
  version       print the version this binary was built from

Run 'modelgate <command> --help' (or 'modelgate help <command>') for a
command's flags and an example.

example:
  modelgate dev
`

func run(ctx context.Context, args []string, e env) error {
	err := dispatch(ctx, args, e)
	if errors.Is(err, errHelpShown) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, e env) error {
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
	case "version", "--version", "-version":
		return runVersion(rest, e)
	case "help", "-h", "--help", "-help":
		if len(rest) > 0 && cmd == "help" { // modelgate help keys [create]
			return dispatch(ctx, append(rest[:len(rest):len(rest)], "--help"), e)
		}
		fmt.Fprint(e.stdout, usage)
		return errHelpShown
	}
	fmt.Fprint(e.stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

func runVersion(args []string, e env) error {
	c := newCommand("version", e, cmdHelp{
		synopsis: "modelgate version",
		about:    "Prints the module version and VCS revision the binary was built from;\n\"(devel)\" for a build from a checkout.",
		example:  "modelgate version",
	})
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.noArgs(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "modelgate", version())
	return nil
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

// errHelpShown is returned once a command has printed its help on stdout
// because it was asked to: run turns it into success.
var errHelpShown = errors.New("help shown")

// cmdHelp is what a command's --help says besides its flags.
type cmdHelp struct {
	synopsis string // the command line, such as "modelgate validate --config F"
	about    string // what the command does
	example  string // one command line or more
}

// command is a subcommand's flags and help.
type command struct {
	*flag.FlagSet
	name string // such as "keys create"
	help cmdHelp
	e    env
}

// newCommand returns a command whose flag set reports errors instead of
// exiting and prints nothing itself: parse prints the usage.
func newCommand(name string, e env, h cmdHelp) *command {
	fs := flag.NewFlagSet("modelgate "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &command{FlagSet: fs, name: name, help: h, e: e}
}

// parse parses args. Asked for help (-h, --help), it prints the usage on
// stdout and returns errHelpShown; given a wrong flag, it prints the usage
// on stderr and returns the error.
func (c *command) parse(args []string) error {
	err := c.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printUsage(c.e.stdout)
		return errHelpShown
	case err != nil:
		return c.usageError("%v", err)
	}
	return nil
}

// usageError prints the usage on stderr and returns the problem, for a
// missing or wrong argument.
func (c *command) usageError(format string, args ...any) error {
	c.printUsage(c.e.stderr)
	return fmt.Errorf("%s: %s", c.name, fmt.Sprintf(format, args...))
}

// require is a usage error when a required flag is empty.
func (c *command) require(flagName, value string) error {
	if value == "" {
		return c.usageError("--%s is required", flagName)
	}
	return nil
}

// noArgs is a usage error when arguments follow the flags.
func (c *command) noArgs() error {
	if c.NArg() > 0 {
		return c.usageError("unexpected argument %q", c.Arg(0))
	}
	return nil
}

// printUsage writes the synopsis, what the command does, its flags with
// their defaults and an example.
func (c *command) printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.help.synopsis, strings.TrimSpace(c.help.about))
	n := 0
	c.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nflags:\n")
		tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
		c.VisitAll(func(f *flag.Flag) {
			arg, text := flagArg(f)
			if arg != "" {
				arg = " " + arg
			}
			if f.DefValue != "" && f.DefValue != "false" {
				text += fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(tw, "  --%s%s\t%s\n", f.Name, arg, text)
		})
		tw.Flush() //nolint:errcheck // w is a terminal or a buffer
	}
	if c.help.example != "" {
		fmt.Fprint(w, "\nexample:\n")
		for _, l := range strings.Split(strings.TrimSpace(c.help.example), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

// flagArg returns the name of a flag's argument and its description: a
// usage starting with a back-quoted name, such as "`ADDR` the address",
// names the argument.
func flagArg(f *flag.Flag) (arg, text string) {
	if name, rest, ok := strings.Cut(f.Usage, " "); ok && len(name) > 2 && name[0] == '`' && name[len(name)-1] == '`' {
		return name[1 : len(name)-1], rest
	}
	return flag.UnquoteUsage(f)
}
