package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Connection defaults.
const (
	// DefaultServer is the address of the local gateway (gatewayd), reached
	// with TLS.
	DefaultServer = "127.0.0.1:8443"
	// DefaultPlaintextServer is the address of the local ipamd, reached in
	// plaintext with --plaintext.
	DefaultPlaintextServer = "127.0.0.1:7400"
)

// Environment variables read by beaconctl.
const (
	EnvServer = "BEACON_SERVER"
	EnvToken  = "BEACON_TOKEN"
	EnvCA     = "BEACON_CA"
	EnvCert   = "BEACON_CERT"
	EnvKey    = "BEACON_KEY"
	EnvConfig = "BEACON_CONFIG"
)

// The files `make run` writes, relative to the repository root: the dev CA
// that signed the gateway's certificate, and the bootstrap admin token.
var (
	devCAFile    = filepath.Join(".data", "certs", "ca.pem")
	devTokenFile = filepath.Join(".data", "admin-token")
)

// fileConfig is the config file: connection settings only.
type fileConfig struct {
	Server    string `yaml:"server"`
	CA        string `yaml:"ca"`
	Cert      string `yaml:"cert"`
	Key       string `yaml:"key"`
	Token     string `yaml:"token"`
	TokenFile string `yaml:"token_file"`
}

// defaultConfigPath is $XDG_CONFIG_HOME/beacon/config.yaml, or
// ~/.config/beacon/config.yaml; "" if neither variable is set.
func (g *globals) defaultConfigPath() string {
	if d := g.env.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "beacon", "config.yaml")
	}
	if h := g.env.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "beacon", "config.yaml")
	}
	return ""
}

// loadConfig reads the config file named by --config or BEACON_CONFIG, which
// must exist, or else the default one, if it exists. Relative paths in it
// are made relative to its directory.
func (g *globals) loadConfig(flags *pflag.FlagSet) (fileConfig, error) {
	path, explicit := g.configFile, flags.Changed("config")
	if !explicit {
		if v := g.env.Getenv(EnvConfig); v != "" {
			path, explicit = v, true
		} else {
			path = g.defaultConfigPath()
		}
	}
	var cfg fileConfig
	if path == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("reading config file: %w", err)
	}
	// JSON is YAML, so one decoder reads both.
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("config file %s: %w", path, err)
	}
	if cfg.Token != "" && cfg.TokenFile != "" {
		return cfg, fmt.Errorf("config file %s: set token or token_file, not both", path)
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&cfg.CA, &cfg.Cert, &cfg.Key, &cfg.TokenFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return cfg, nil
}

// exists reports whether path names a regular file.
func exists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// readToken reads a token from a file, without surrounding white space.
func readToken(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", what, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s %s is empty", what, path)
	}
	return tok, nil
}

// resolveConnection settles the connection settings: flags, then the
// environment, then the config file, then defaults (including the files of
// `make run` in the current directory).
func (g *globals) resolveConnection(flags *pflag.FlagSet) error {
	cfg, err := g.loadConfig(flags)
	if err != nil {
		return err
	}
	plaintext := g.plaintext || flags.Changed("tls") && !g.tls
	if g.plaintext && flags.Changed("tls") && g.tls {
		return fmt.Errorf("--plaintext and --tls contradict each other")
	}
	if plaintext {
		for _, name := range []string{"ca", "cert", "key", "insecure-skip-verify"} {
			if flags.Changed(name) {
				return fmt.Errorf("--%s needs TLS; drop --plaintext (or --tls=false)", name)
			}
		}
	}
	g.tls = !plaintext

	// pick sets *v from the flag if it was given, else from the
	// environment, else from the config file, and says where it came from.
	pick := func(flag string, v *string, env, fromFile, fileKey string) string {
		if flags.Changed(flag) {
			return "--" + flag
		}
		if e := g.env.Getenv(env); e != "" {
			*v = e
			return env
		}
		*v = fromFile
		return fileKey + " in the config file"
	}
	pick("server", &g.server, EnvServer, cfg.Server, "server")
	if g.server == "" {
		if !flags.Changed("server") {
			g.server = DefaultServer
			if plaintext {
				g.server = DefaultPlaintextServer
			}
		} else {
			return fmt.Errorf("--server must not be empty")
		}
	}
	tokenFrom := pick("token", &g.token, EnvToken, cfg.Token, "token")
	if !plaintext {
		g.caSource = pick("ca", &g.caFile, EnvCA, cfg.CA, "ca")
		g.certSource = pick("cert", &g.certFile, EnvCert, cfg.Cert, "cert")
		pick("key", &g.keyFile, EnvKey, cfg.Key, "key")
	} else {
		g.caFile, g.certFile, g.keyFile = "", "", ""
	}
	if g.token == "" && cfg.TokenFile != "" && tokenFrom != "--token" {
		if g.token, err = readToken(cfg.TokenFile, "token_file"); err != nil {
			return err
		}
	}
	if (g.certFile == "") != (g.keyFile == "") {
		return fmt.Errorf("--cert and --key must be given together (a client certificate needs its key)")
	}
	// The `make run` layout: the dev CA and the bootstrap admin token.
	if !plaintext {
		if ca := filepath.Join(g.env.Dir, devCAFile); g.caFile == "" && !g.insecureSkipVerify && exists(ca) {
			g.caFile, g.caSource = ca, ca
		}
		if tok := filepath.Join(g.env.Dir, devTokenFile); g.token == "" && g.certFile == "" && exists(tok) {
			if g.token, err = readToken(tok, tok); err != nil {
				return err
			}
		}
	}
	return nil
}
