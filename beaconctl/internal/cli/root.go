// Package cli builds beaconctl's commands.
package cli

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
)

// Env is what the commands use of the process: its streams and environment.
type Env struct {
	// Stdin is read by -f - and --password-stdin; nil reads as empty.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv looks up an environment variable; "" means unset.
	Getenv func(string) string
	// Dir is where the files of `make run` (.data/certs/ca.pem and
	// .data/admin-token) are looked for; "" is the current directory.
	Dir string
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
	plaintext          bool
	configFile         string
	caFile             string
	certFile           string
	keyFile            string
	insecureSkipVerify bool
	token              string

	// caSource and certSource say where the CA and the client certificate
	// came from, for errors.
	caSource, certSource string
}

// NewRootCommand builds the beaconctl command tree.
func NewRootCommand(env Env) *cobra.Command {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	g := &globals{env: env}
	root := &cobra.Command{
		Use:   "beaconctl",
		Short: "Manage Beacon address pools, allocations, announcements, tenants, tokens and audit records",
		Long: `beaconctl talks to Beacon over gRPC. It manages pools (the address ranges
that allocations draw from), allocations (the addresses held by an owner
such as a Service), how addresses are announced (L2 and BGP advertisements,
BGP peers, BFD profiles, community aliases), inspects and drains the
announcers on the nodes, manages tenants (with their address quotas) and
the gateway's tokens, and reads the audit trail.

Pool names may be given short: "web" and "pools/web" are the same pool.
Allocations are named "tenants/{tenant}/allocations/{id}"; commands that
take an allocation also accept OWNER together with --tenant. Announcement
resources and announcers are named "tenants/{tenant}/{collection}/{id}";
commands take the ID with --tenant, or the full name.

By default beaconctl connects with TLS to the Beacon gateway (gatewayd) at
` + DefaultServer + `, which authenticates every call by a bearer token
(--token, sent as "authorization: Bearer TOKEN") or a client certificate
(--cert and --key). Each connection setting comes from its flag, else from
the environment (` + EnvServer + `, ` + EnvToken + `, ` + EnvCA + `,
` + EnvCert + `, ` + EnvKey + `), else from the config file (--config or
` + EnvConfig + `; default $XDG_CONFIG_HOME/beacon/config.yaml, or
~/.config/beacon/config.yaml), a YAML or JSON object with the keys server,
ca, cert, key, token and token_file (paths relative to the file).

Run from the root of a Beacon checkout after "make run", beaconctl needs no
settings: with no CA configured it trusts .data/certs/ca.pem, and with no
token or client certificate configured it presents .data/admin-token, the
admin token, if those files exist.

--plaintext (or --tls=false) talks plaintext to ipamd itself, by default at
` + DefaultPlaintextServer + `, bypassing the gateway: for local debugging.`,
		Example: `  # List pools with their usage.
  beaconctl pool list

  # Give the Service default/web an address from any auto-assigned pool.
  beaconctl alloc allocate default/web --tenant acme

  # Announce pool web with ARP/NDP, and see which node does.
  beaconctl l2adv create web --tenant acme --pool web
  beaconctl announcer list --tenant acme

  # A tenant with a quota, and a token for its cluster (the secret is shown once).
  beaconctl tenant create acme --max-addresses 64
  beaconctl token create acme-cluster --role tenant --tenant acme --expires 720h

  # Talk to a remote gateway with a token, printing JSON.
  beaconctl --server beacon.example.net:8443 --ca ca.pem --token "$TOKEN" -o json pool get web

  # Bypass the gateway: plaintext to the local ipamd.
  beaconctl --plaintext pool list`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: g.resolve,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	// --version prints what the version command prints in table form.
	root.Version = version()
	root.SetVersionTemplate("beaconctl {{.Version}} (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", err, c.CommandPath())
	})

	f := root.PersistentFlags()
	f.StringVar(&g.server, "server", "", "`HOST:PORT` of the Beacon gateway (env "+EnvServer+"; default "+DefaultServer+", or ipamd at "+DefaultPlaintextServer+" with --plaintext)")
	f.StringVar(&g.configFile, "config", "", "config `FILE` with connection settings (env "+EnvConfig+"; default $XDG_CONFIG_HOME/beacon/config.yaml)")
	f.StringVarP(&g.outputFlag, "output", "o", string(output.Table), "output `FORMAT`: table, json (protobuf JSON; a list for list commands) or name (one resource name per line)")
	f.DurationVar(&g.timeout, "timeout", 10*time.Second, "time limit `DURATION` of each call to the server; 0 for none (alloc watch is not limited)")
	f.BoolVar(&g.tls, "tls", true, "connect with TLS; --tls=false is --plaintext")
	f.BoolVar(&g.plaintext, "plaintext", false, "connect without TLS, by default to ipamd at "+DefaultPlaintextServer+" (local debugging)")
	f.StringVar(&g.caFile, "ca", "", "PEM `FILE` of CA certificates to verify the server with, instead of the system's (env "+EnvCA+"; default .data/certs/ca.pem if it exists)")
	f.StringVar(&g.certFile, "cert", "", "PEM `FILE` of the client certificate, for mutual TLS (with --key; env "+EnvCert+")")
	f.StringVar(&g.keyFile, "key", "", "PEM `FILE` of the client certificate's private key (with --cert; env "+EnvKey+")")
	f.BoolVar(&g.insecureSkipVerify, "insecure-skip-verify", false, "do not verify the server's certificate (testing only)")
	f.StringVar(&g.token, "token", "", "bearer `TOKEN` sent as \"authorization: Bearer TOKEN\" metadata (env "+EnvToken+"; default .data/admin-token if it exists and no client certificate is set)")

	root.AddCommand(
		newPoolCommand(g),
		newAllocCommand(g),
		newAuditCommand(g),
		newConfigCommand(g, l2AdvKind()),
		newConfigCommand(g, bgpAdvKind()),
		newConfigCommand(g, peerKind()),
		newConfigCommand(g, bfdKind()),
		newConfigCommand(g, communityKind()),
		newConfigCommand(g, nodeKind()),
		newAnnouncerCommand(g),
		newTenantCommand(g),
		newGroupCommand(g),
		newTokenCommand(g),
		newVersionCommand(g),
		newCertsCommand(),
	)
	// certs bootstrap talks to the IPAM, so it needs the global flags.
	for _, c := range root.Commands() {
		if c.Name() == "certs" {
			c.AddCommand(newCertsBootstrapCommand(g))
		}
	}
	return root
}

// resolve settles the connection settings and checks the global flags.
func (g *globals) resolve(cmd *cobra.Command, _ []string) error {
	format, err := output.ParseFormat(g.outputFlag)
	if err != nil {
		return err
	}
	g.output = format
	if g.timeout < 0 {
		return fmt.Errorf("--timeout must not be negative")
	}
	return g.resolveConnection(cmd.Flags())
}
