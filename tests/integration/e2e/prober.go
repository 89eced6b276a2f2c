package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ARPProber asks who has an IPv4 address, by broadcast, at a steady rate
// from the prober namespace, and records every reply with the time it was
// read. It shows which nodes answer for an address from moment to moment,
// without touching the client's neighbour table.
type ARPProber struct {
	fd      int
	target  netip.Addr
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	replies []ARPReply
	sent    []time.Time // when each request was sent
	sendErr error
}

// ARPReply is one reply the prober read.
type ARPReply struct {
	At  time.Time
	MAC net.HardwareAddr
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// StartARPProber starts asking for target every interval. Call Stop.
func (c *Cluster) StartARPProber(target netip.Addr, interval time.Duration) (*ARPProber, error) {
	if !target.Is4() {
		return nil, fmt.Errorf("e2e: ARP prober needs an IPv4 address, not %s", target)
	}
	h, err := nsHandle(c.Prober.NS)
	if err != nil {
		return nil, err
	}
	l, err := h.LinkByName("eth0")
	h.Close()
	if err != nil {
		return nil, err
	}
	ifindex, mac := l.Attrs().Index, l.Attrs().HardwareAddr
	var fd int
	err = InNamespace(c.Prober.NS, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifindex}); err != nil {
			_ = unix.Close(fd)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("e2e: ARP prober socket: %w", err)
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 50_000}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("e2e: ARP prober socket: %w", err)
	}
	p := &ARPProber{fd: fd, target: target, stop: make(chan struct{})}
	frame := arpRequest(mac, ProberAddr4, target)
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifindex, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			err := unix.Sendto(fd, frame, 0, to)
			p.mu.Lock()
			if err != nil {
				p.sendErr = err
			} else {
				p.sent = append(p.sent, time.Now())
			}
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	go func() {
		defer p.wg.Done()
		p.receive()
	}()
	return p, nil
}

func arpRequest(src net.HardwareAddr, from, target netip.Addr) []byte {
	b := make([]byte, 42)
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:14], unix.ETH_P_ARP)
	binary.BigEndian.PutUint16(b[14:16], 1)      // Ethernet
	binary.BigEndian.PutUint16(b[16:18], 0x0800) // IPv4
	b[18], b[19] = 6, 4
	binary.BigEndian.PutUint16(b[20:22], 1) // request
	copy(b[22:28], src)
	f4, t4 := from.As4(), target.As4()
	copy(b[28:32], f4[:])
	copy(b[38:42], t4[:])
	return b
}

func (p *ARPProber) receive() {
	buf := make([]byte, 1600)
	want := p.target.As4()
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		n, _, err := unix.Recvfrom(p.fd, buf, 0)
		at := time.Now()
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		if n < 42 || binary.BigEndian.Uint16(buf[12:14]) != unix.ETH_P_ARP || binary.BigEndian.Uint16(buf[20:22]) != 2 {
			continue
		}
		if !bytes.Equal(buf[28:32], want[:]) {
			continue
		}
		mac := net.HardwareAddr(bytes.Clone(buf[22:28]))
		p.mu.Lock()
		p.replies = append(p.replies, ARPReply{At: at, MAC: mac})
		p.mu.Unlock()
	}
}

// Stop stops the prober and closes its socket.
func (p *ARPProber) Stop() error {
	close(p.stop)
	p.wg.Wait()
	p.mu.Lock()
	err := p.sendErr
	p.mu.Unlock()
	return errors.Join(err, unix.Close(p.fd))
}

// Replies returns the replies read so far.
func (p *ARPProber) Replies() []ARPReply {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ARPReply(nil), p.replies...)
}

// Unanswered returns how many more requests the prober has sent since
// from than it has read replies from mac since then: the requests mac
// did not answer, plus those whose replies are still on their way. It
// does not grow while the machine stalls (the prober sends nothing
// then), which makes it, unlike a gap between replies, robust to load.
func (p *ARPProber) Unanswered(mac net.HardwareAddr, from time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.sent {
		if !at.Before(from) {
			n++
		}
	}
	for _, r := range p.replies {
		if !r.At.Before(from) && bytes.Equal(r.MAC, mac) {
			n--
		}
	}
	return n
}

// LastFrom returns when mac last answered (zero: never).
func (p *ARPProber) LastFrom(mac net.HardwareAddr) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.replies) - 1; i >= 0; i-- {
		if bytes.Equal(p.replies[i].MAC, mac) {
			return p.replies[i].At
		}
	}
	return time.Time{}
}

// MACsBetween returns the distinct MACs that answered in [from, to).
func (p *ARPProber) MACsBetween(from, to time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, r := range p.replies {
		if r.At.Before(from) || !r.At.Before(to) || seen[r.MAC.String()] {
			continue
		}
		seen[r.MAC.String()] = true
		out = append(out, r.MAC.String())
	}
	return out
}

// LongestGap returns the longest time in [from, to) without a reply from
// mac (from and to count as the ends of gaps).
func (p *ARPProber) LongestGap(mac net.HardwareAddr, from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, gap := from, time.Duration(0)
	for _, r := range p.replies {
		if r.At.Before(from) || !r.At.Before(to) || !bytes.Equal(r.MAC, mac) {
			continue
		}
		gap = max(gap, r.At.Sub(last))
		last = r.At
	}
	return max(gap, to.Sub(last))
}
