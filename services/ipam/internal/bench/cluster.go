package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	c, err := startProcCluster(ctx, binary, members, dir)
	if err != nil {
		return nil, nil, err
	}
	return c.endpoints, c.stop, nil
}

// procCluster is a cluster of etcd processes whose members can be killed
// and started again (a failover.Cluster).
type procCluster struct {
	dir       string
	endpoints []string
	args      [][]string
	mu        sync.Mutex
	procs     []*exec.Cmd // nil while killed
	status    *clientv3.Client
}

func startProcCluster(ctx context.Context, binary string, members int, dir string) (c *procCluster, err error) {
	ports, err := loopback.FreePorts(2 * members)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	c = &procCluster{dir: dir, procs: make([]*exec.Cmd, members)}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.stop())
		}
	}()
	for i := range members {
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		c.endpoints = append(c.endpoints, client)
		c.args = append(c.args, []string{binary,
			"--name", fmt.Sprintf("m%d", i),
			"--data-dir", filepath.Join(dir, fmt.Sprintf("m%d", i)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", "ipam-bench",
			"--log-level", "warn",
		})
		if err := c.start(i); err != nil {
			return nil, err
		}
	}
	if err := waitServing(ctx, c.endpoints); err != nil {
		return nil, fmt.Errorf("etcd cluster (logs in %s): %w", dir, err)
	}
	return c, nil
}

// start starts member i, its output appended to its log.
func (c *procCluster) start(i int) error {
	logf, err := os.OpenFile(filepath.Join(c.dir, fmt.Sprintf("m%d.log", i)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644) //nolint:gosec // a log
	if err != nil {
		return err
	}
	cmd := exec.Command(c.args[i][0], c.args[i][1:]...) //nolint:gosec // the etcd binary the caller named
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	_ = logf.Close() // the child holds its own descriptor
	if err != nil {
		return fmt.Errorf("start etcd member %d: %w", i, err)
	}
	c.mu.Lock()
	c.procs[i] = cmd
	c.mu.Unlock()
	return nil
}

// stop ends every member with SIGTERM (SIGKILL after 10 s).
func (c *procCluster) stop() error {
	if c.status != nil {
		_ = c.status.Close()
	}
	c.mu.Lock()
	procs := slices.Clone(c.procs)
	c.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if p != nil {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		if p == nil {
			continue
		}
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

// KillLeader sends SIGKILL to the member that leads and reaps it. The
// leader is the member that a majority of the members name as leader at
// the highest term they report (a member just started again can report
// itself leader for a moment); while there is none, an election is under
// way and it asks again every 10 ms.
func (c *procCluster) KillLeader(ctx context.Context) (int, time.Time, error) {
	if c.status == nil {
		cl, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 5 * time.Second})
		if err != nil {
			return -1, time.Time{}, err
		}
		c.status = cl
	}
	for ctx.Err() == nil {
		if i := c.leader(ctx); i >= 0 {
			c.mu.Lock()
			p := c.procs[i]
			c.procs[i] = nil
			c.mu.Unlock()
			at := time.Now()
			if err := p.Process.Kill(); err != nil {
				return -1, at, err
			}
			_ = p.Wait() // killed
			return i, at, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	return -1, time.Time{}, ctx.Err()
}

// leader returns the index of the live member a majority names as leader
// at the highest term, or -1.
func (c *procCluster) leader(ctx context.Context) int {
	type view struct{ id, leader, term uint64 }
	views := make([]view, len(c.endpoints))
	var wg sync.WaitGroup
	for i, ep := range c.endpoints {
		c.mu.Lock()
		live := c.procs[i] != nil
		c.mu.Unlock()
		if !live {
			continue
		}
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if st, err := c.status.Status(sctx, ep); err == nil {
				views[i] = view{id: st.Header.MemberId, leader: st.Leader, term: st.RaftTerm}
			}
		})
	}
	wg.Wait()
	var top uint64
	for _, v := range views {
		top = max(top, v.term)
	}
	votes := make(map[uint64]int)
	for _, v := range views {
		if v.term == top && v.leader != 0 {
			votes[v.leader]++
		}
	}
	for i, v := range views {
		if v.id != 0 && votes[v.id] > len(c.endpoints)/2 && v.leader == v.id {
			return i
		}
	}
	return -1
}

// Restart starts member i again on its data and waits until it answers.
func (c *procCluster) Restart(ctx context.Context, i int) error {
	if err := c.start(i); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.status.Status(sctx, c.endpoints[i])
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("etcd member %d not back (log in %s): %w", i, c.dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
