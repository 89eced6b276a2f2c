package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/beaconlb/beacon/pkg/loopback"
)

// startCluster starts a cluster of members etcd processes (the etcd binary
// at binary: a real etcd cluster, as production runs one) on loopback, each
// with its data and log under dir and fsync on. It returns once the cluster
// has a leader and answers, with every member's client URL; stop ends every
// member with SIGTERM (SIGKILL after 10 s).
func startCluster(ctx context.Context, binary string, members int, dir string) (endpoints []string, stop func() error, err error) {
	ports, err := loopback.FreePorts(2 * members)
	if err != nil {
		return nil, nil, err
	}
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	var procs []*exec.Cmd
	stop = func() error {
		var errs []error
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			done := make(chan struct{})
			go func() {
				_ = p.Wait() // ended by SIGTERM, or killed below
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = p.Process.Kill()
				errs = append(errs, fmt.Errorf("etcd %v did not stop on SIGTERM", p.Args[1:3]))
				<-done
			}
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, stop())
		}
	}()
	for i := range members {
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		endpoints = append(endpoints, client)
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("m%d.log", i)))
		if err != nil {
			return nil, nil, err
		}
		cmd := exec.Command(binary, //nolint:gosec // the etcd binary the caller named
			"--name", fmt.Sprintf("m%d", i),
			"--data-dir", filepath.Join(dir, fmt.Sprintf("m%d", i)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", "ipam-bench",
			"--log-level", "warn",
		)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			_ = logf.Close()
			return nil, nil, fmt.Errorf("start etcd member %d: %w", i, err)
		}
		_ = logf.Close() // the child holds its own descriptor
		procs = append(procs, cmd)
	}
	if err := waitServing(ctx, endpoints); err != nil {
		return nil, nil, fmt.Errorf("etcd cluster (logs in %s): %w", dir, err)
	}
	return endpoints, stop, nil
}

// waitServing waits (at most 60 s) until a write through endpoints
// succeeds: the cluster has elected a leader.
func waitServing(ctx context.Context, endpoints []string) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.Put(pctx, "/bench/ready", "1")
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("not serving: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
