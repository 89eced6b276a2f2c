package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// endpointPrefix starts the line on which ServeEtcd announces its client
// URL.
const endpointPrefix = "ETCD-ENDPOINT "

// ServeEtcd runs an embedded etcd with its data in dir, on a free loopback
// port, until ctx is done: the body of the child process of
// Config.EtcdCommand. It writes "ETCD-ENDPOINT <url>" on out once etcd
// serves.
func ServeEtcd(ctx context.Context, dir string, out io.Writer) error {
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: dir, ClientURL: "http://127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		return err
	}
	defer emb.Close()
	eps := emb.Endpoints()
	if len(eps) == 0 {
		return errors.New("embedded etcd has no client endpoint")
	}
	if _, err := fmt.Fprintln(out, endpointPrefix+eps[0]); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-emb.Err():
		return err
	}
}

// startChild starts command with dir appended and waits for the endpoint
// it announces; stop ends it with SIGTERM (SIGKILL after 10 s).
func startChild(ctx context.Context, command []string, dir string) ([]string, func() error, error) {
	args := append(append([]string(nil), command[1:]...), dir)
	cmd := exec.Command(command[0], args...) //nolint:gosec // the bench's own binary, from its caller
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start etcd process: %w", err)
	}
	exited := make(chan error, 1)
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			return errors.Join(errors.New("etcd process did not stop on SIGTERM"), <-exited)
		}
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if ep, ok := strings.CutPrefix(sc.Text(), endpointPrefix); ok {
				found <- ep
			}
		}
		exited <- cmd.Wait()
	}()
	select {
	case ep := <-found:
		return []string{ep}, stop, nil
	case err := <-exited:
		exited <- err
		return nil, nil, fmt.Errorf("etcd process ended before serving: %w", err)
	case <-time.After(60 * time.Second):
		return nil, nil, errors.Join(errors.New("etcd process not serving after 60 s"), stop())
	case <-ctx.Done():
		return nil, nil, errors.Join(ctx.Err(), stop())
	}
}
