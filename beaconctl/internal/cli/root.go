// Package cli builds beaconctl's commands.
package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
)

// DefaultServer is the address of the local ipamd.
const DefaultServer = "127.0.0.1:7400"

// Environment variables read by beaconctl.
const (
	EnvServer = "BEACON_SERVER"
	EnvToken  = "BEACON_TOKEN"
)

// Env is what the commands use of the process: its streams and environment.
type Env struct {
	// Stdin is read by -f - and --password-stdin; nil reads as empty.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv looks up an environment variable; "" means unset.
	Getenv func(string) string
}

// OSEnv is the process's own Env.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// globals holds the values of the global flags.
type globals struct {
	env        Env
	server     string
	outputFlag string
	output     output.Format
	timeout    time.Duration

	tls                bool
	caFile             string
	certFile           string
	keyFile            string
	insecureSkipVerify bool
	token              string
}

// NewRootCommand builds the beaconctl command tree.
func NewRootCommand(env Env) *cobra.Command {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	g := &globals{env: env}
	root := &cobra.Command{
		Use:   "beaconctl",
		Short: "Manage Beacon address pools, allocations, announcements and audit records",
		Long: `beaconctl talks to a Beacon IPAM server (ipamd) over gRPC. It manages
pools (the address ranges that allocations draw from), allocations (the
addresses held by an owner such as a Service), how addresses are announced
(L2 and BGP advertisements, BGP peers, BFD profiles, community aliases),
inspects and drains the announcers on the nodes, and reads the audit trail.

Pool names may be given short: "web" and "pools/web" are the same pool.
Allocations are named "tenants/{tenant}/allocations/{id}"; commands that
take an allocation also accept OWNER together with --tenant. Announcement
resources and announcers are named "tenants/{tenant}/{collection}/{id}";
commands take the ID with --tenant, or the full name.

By default beaconctl connects in plaintext to the local ipamd at
` + DefaultServer + `. Set --server (or ` + EnvServer + `) to reach another
server, and --tls with --ca, --cert and --key for TLS and client
certificates. A token from --token (or ` + EnvToken + `) is sent as
"authorization: Bearer TOKEN" metadata on every call.`,
		Example: `  # List pools with their usage.
  beaconctl pool list

  # Give the Service default/web an address from any auto-assigned pool.
  beaconctl alloc allocate default/web --tenant acme

  # Announce pool web with ARP/NDP, and see which node does.
  beaconctl l2adv create web --tenant acme --pool web
  beaconctl announcer list --tenant acme

  # Talk to a remote server over TLS, printing JSON.
  beaconctl --server ipam.example.net:7400 --tls --ca ca.pem -o json pool get web`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: g.resolve,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", err, c.CommandPath())
	})

	f := root.PersistentFlags()
	f.StringVar(&g.server, "server", DefaultServer, "`HOST:PORT` of the Beacon server (env "+EnvServer+")")
	f.StringVarP(&g.outputFlag, "output", "o", string(output.Table), "output `FORMAT`: table, json (protobuf JSON; a list for list commands) or name (one resource name per line)")
	f.DurationVar(&g.timeout, "timeout", 10*time.Second, "time limit `DURATION` of each call to the server; 0 for none (alloc watch is not limited)")
	f.BoolVar(&g.tls, "tls", false, "connect with TLS (implied by --ca, --cert, --key and --insecure-skip-verify)")
	f.StringVar(&g.caFile, "ca", "", "PEM `FILE` of CA certificates to verify the server with, instead of the system's")
	f.StringVar(&g.certFile, "cert", "", "PEM `FILE` of the client certificate, for mutual TLS (with --key)")
	f.StringVar(&g.keyFile, "key", "", "PEM `FILE` of the client certificate's private key (with --cert)")
	f.BoolVar(&g.insecureSkipVerify, "insecure-skip-verify", false, "do not verify the server's certificate (testing only)")
	f.StringVar(&g.token, "token", "", "bearer `TOKEN` sent as \"authorization: Bearer TOKEN\" metadata (env "+EnvToken+")")

	root.AddCommand(
		newPoolCommand(g),
		newAllocCommand(g),
		newAuditCommand(g),
		newConfigCommand(g, l2AdvKind()),
		newConfigCommand(g, bgpAdvKind()),
		newConfigCommand(g, peerKind()),
		newConfigCommand(g, bfdKind()),
		newConfigCommand(g, communityKind()),
		newAnnouncerCommand(g),
		newVersionCommand(g),
	)
	return root
}

// resolve applies environment defaults and checks the global flags.
func (g *globals) resolve(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	if !f.Changed("server") {
		if v := g.env.Getenv(EnvServer); v != "" {
			g.server = v
		}
	}
	if !f.Changed("token") {
		g.token = g.env.Getenv(EnvToken)
	}
	if g.server == "" {
		return fmt.Errorf("--server must not be empty")
	}
	format, err := output.ParseFormat(g.outputFlag)
	if err != nil {
		return err
	}
	g.output = format
	if g.timeout < 0 {
		return fmt.Errorf("--timeout must not be negative")
	}
	if (g.certFile == "") != (g.keyFile == "") {
		return fmt.Errorf("--cert and --key must be given together")
	}
	if g.caFile != "" || g.certFile != "" || g.insecureSkipVerify {
		g.tls = true
	}
	return nil
}
