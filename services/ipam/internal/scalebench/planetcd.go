package scalebench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/beaconlb/beacon/pkg/loopback"
	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// startPlanEtcd starts a fresh one-member etcd on loopback, on disk with
// fsync on: cfg.Etcd as a child process (so that its CPU is not the
// IPAM's), else embedded in this process.
func startPlanEtcd(ctx context.Context, cfg Config, logger *slog.Logger) (*store.Client, func() error, error) {
	dir, err := os.MkdirTemp("", "ipam-scale-plan-")
	if err != nil {
		return nil, nil, err
	}
	if cfg.Etcd == "" {
		emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: dir, ClientURL: "http://127.0.0.1:0", Logger: logger})
		if err != nil {
			return nil, nil, errors.Join(err, os.RemoveAll(dir))
		}
		return emb.Client(), func() error { emb.Close(); return os.RemoveAll(dir) }, nil
	}
	ports, err := loopback.FreePorts(2)
	if err != nil {
		return nil, nil, errors.Join(err, os.RemoveAll(dir))
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, nil, errors.Join(err, os.RemoveAll(dir))
	}
	cmd := exec.Command(cfg.Etcd, //nolint:gosec // the etcd binary the caller named
		"--name", "m0", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "m0="+peer, "--initial-cluster-state", "new",
		"--quota-backend-bytes", fmt.Sprint(8<<30), "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	_ = logf.Close() // the child holds its own descriptor
	if err != nil {
		return nil, nil, errors.Join(err, os.RemoveAll(dir))
	}
	stop := func() error {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }() // ended by the signal, or killed below
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		return os.RemoveAll(dir)
	}
	c, err := store.Dial(ctx, store.DialConfig{Endpoints: []string{client}})
	if err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Etcd().Status(sctx, client)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = c.Close()
			return nil, nil, errors.Join(fmt.Errorf("etcd did not answer in a minute (log in %s): %w", dir, err), stop())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c, func() error { _ = c.Close(); return stop() }, nil
}

// poolOf is a pool of the ranges, for the tenants (nil: every tenant).
func poolOf(name string, ranges, tenants []string) (*ipam.Pool, error) {
	p := &ipam.Pool{Name: name, Tenants: tenants, AutoAssign: true, CreateTime: time.Now(), UpdateTime: time.Now()}
	for _, s := range ranges {
		r, err := addrspace.ParseRange(s)
		if err != nil {
			return nil, err
		}
		p.Ranges = append(p.Ranges, r)
	}
	return p, nil
}

// selectors is one selector matching a label.
func selectors(k, v string) []selector.Selector {
	return []selector.Selector{{MatchLabels: map[string]string{k: v}}}
}
