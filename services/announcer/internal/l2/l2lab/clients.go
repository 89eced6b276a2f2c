package l2lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The real clients, run in the client namespace.

// arpingReply matches iputils arping's
// "Unicast reply from 192.0.2.100 [02:AA:...]  0.6ms".
func arpingReply() *regexp.Regexp {
	return regexp.MustCompile(`reply from (\S+) \[([0-9A-Fa-f:]{17})\]`)
}

// ndiscReply matches ndisc6's "Target link-layer address: 02:AA:...".
func ndiscReply() *regexp.Regexp {
	return regexp.MustCompile(`Target link-layer address: ([0-9A-Fa-f:]{17})`)
}

// Arping sends count ARP requests for addr out of dev, one a second (this
// arping takes whole seconds only), waits up to wait in all (rounded up to
// a second) for replies, and returns the MAC of every reply. No reply is
// not an error.
func (l *Lab) Arping(ctx context.Context, dev string, addr netip.Addr, count int, wait time.Duration) ([]net.HardwareAddr, error) {
	secs := int((wait + time.Second - 1) / time.Second)
	out, err := l.Exec(ctx, l.Client, "arping", "-I", dev, "-c", strconv.Itoa(count), "-w", strconv.Itoa(secs), addr.String())
	// arping exits 1 both when nothing answered and on bad usage; only a
	// run that sent its probes prints "Sent N probes".
	if !strings.Contains(out, "Sent ") {
		if err == nil {
			err = errors.New("no summary line")
		}
		return nil, fmt.Errorf("arping: %w:\n%s", err, out)
	}
	var macs []net.HardwareAddr
	for _, m := range arpingReply().FindAllStringSubmatch(out, -1) {
		if m[1] != addr.String() {
			return nil, fmt.Errorf("arping: reply from %s, asked for %s:\n%s", m[1], addr, out)
		}
		mac, perr := net.ParseMAC(m[2])
		if perr != nil {
			return nil, fmt.Errorf("arping: %w", perr)
		}
		macs = append(macs, mac)
	}
	return macs, nil
}

// Ndisc6 solicits addr on dev with ndisc6 (up to tries solicitations, each
// waiting wait) and returns the advertised MAC, or nil when none came.
// ndisc6 accepts only advertisements whose source is the target address.
func (l *Lab) Ndisc6(ctx context.Context, dev string, addr netip.Addr, tries int, wait time.Duration) (net.HardwareAddr, error) {
	out, err := l.Exec(ctx, l.Client, "ndisc6", "-1", "-n", "-r", strconv.Itoa(tries),
		"-w", strconv.Itoa(int(wait.Milliseconds())), addr.String(), dev)
	if m := ndiscReply().FindStringSubmatch(out); m != nil {
		return net.ParseMAC(m[1])
	}
	if strings.Contains(out, "No response.") {
		return nil, nil
	}
	if err == nil {
		err = errors.New("neither an answer nor a time-out")
	}
	return nil, fmt.Errorf("ndisc6: %w:\n%s", err, out)
}

// Ping sends one echo request to addr from the client (ping -6 for IPv6),
// which makes the client's kernel resolve addr. The result is ignored:
// nothing answers the echo itself.
func (l *Lab) Ping(ctx context.Context, dev string, addr netip.Addr) {
	args := []string{"ping", "-c", "1", "-W", "1", "-I", dev, addr.String()}
	if addr.Is6() {
		args = append(args[:1], append([]string{"-6"}, args[1:]...)...)
	}
	_, _ = l.Exec(ctx, l.Client, args...)
}

// StartPing runs ping from the client to addr every interval until ctx is
// done, keeping the client's neighbour entry in use (so that the kernel
// runs reachability confirmation on it). The process is killed when ctx
// ends or the test cleans up.
func (l *Lab) StartPing(ctx context.Context, dev string, addr netip.Addr, interval time.Duration) error {
	args := []string{"netns", "exec", l.Client, "ping", "-q", "-I", dev, "-i", fmt.Sprintf("%.3f", interval.Seconds())}
	if addr.Is6() {
		args = append(args, "-6")
	}
	cmd := exec.Command("ip", append(args, addr.String())...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start ping: %w", err)
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	stop := func() {
		_ = cmd.Process.Kill() // by PID: os.Process keeps it
		<-done
	}
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-done:
		}
	}()
	l.t.Cleanup(stop)
	l.t.Logf("ping %s from the client: pid %d", addr, pid)
	return nil
}
