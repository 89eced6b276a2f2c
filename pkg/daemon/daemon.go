// Package daemon is the part of every Beacon binary's main that is the
// same in each: flags that default from the environment, --version, the
// logger, and running until SIGINT or SIGTERM. What a binary runs stays in
// its own run(ctx, cfg, logger).
package daemon

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/beaconlb/beacon/pkg/telemetry"
)

// Daemon is one binary.
type Daemon[C any] struct {
	// Name is the binary's name, for --version and its messages.
	Name string
	// Version is its version (set at build time).
	Version string
	// Parse parses the command line and environment into its config.
	Parse func() (C, error)
	// Basics returns what every config holds: whether --version was
	// given, and the log level.
	Basics func(C) (version bool, logLevel string)
	// Prepare, if set, runs once the logger exists, before Run: for the
	// process-wide set-up a binary needs (klog, the UTS namespace).
	Prepare func(C, *slog.Logger)
	// Run runs the binary until ctx is done.
	Run func(ctx context.Context, cfg C, logger *slog.Logger) error
}

// Main runs d until SIGINT or SIGTERM and exits: 2 on a bad config, 1 if
// Run failed.
func Main[C any](d Daemon[C]) {
	if code := d.main(os.Stdout, os.Stderr, func() (context.Context, context.CancelFunc) {
		return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	}); code != 0 {
		os.Exit(code)
	}
}

// main runs d and returns its exit code; signals returns the context Run
// runs in (ended by SIGINT or SIGTERM).
func (d Daemon[C]) main(stdout, stderr io.Writer, signals func() (context.Context, context.CancelFunc)) int {
	cfg, err := d.Parse()
	if err != nil {
		_, _ = fmt.Fprintln(stderr, d.Name+":", err)
		return 2
	}
	version, level := d.Basics(cfg)
	if version {
		_, _ = fmt.Fprintf(stdout, "%s %s (%s %s/%s)\n", d.Name, d.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	}
	logger, err := telemetry.NewLogger(stderr, level)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, d.Name+":", err)
		return 2
	}
	if d.Prepare != nil {
		d.Prepare(cfg, logger)
	}
	ctx, stop := signals()
	defer stop()
	if err := d.Run(ctx, cfg, logger); err != nil {
		logger.Error(d.Name+" stopped", "error", err)
		return 1
	}
	return 0
}

// Flags is a binary's flag set: a string flag --some-name defaults to the
// environment variable PREFIX_SOME_NAME when that is set, else to its
// default.
type Flags struct {
	*flag.FlagSet
	prefix string
	getenv func(string) string
}

// NewFlags returns the flag set of the binary name, with --version set
// into version; envPrefix is its variables' prefix ("BEACON_IPAM").
func NewFlags(name, envPrefix string, getenv func(string) string, version *bool) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.BoolVar(version, "version", false, "print the version and exit")
	return &Flags{FlagSet: fs, prefix: envPrefix + "_", getenv: getenv}
}

// Env returns the environment's value for the flag name, or def.
func (f *Flags) Env(name, def string) string {
	if v := f.getenv(f.prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); v != "" {
		return v
	}
	return def
}

// String defines a string flag that defaults from the environment.
func (f *Flags) String(p *string, name, def, usage string) {
	f.StringVar(p, name, f.Env(name, def), usage)
}

// List splits a comma-separated flag value, dropping blanks.
func List(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
