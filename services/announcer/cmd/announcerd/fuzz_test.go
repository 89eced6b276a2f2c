package main

import (
	"strings"
	"testing"
)

// validIfName is the kernel's rule for an interface name (dev_valid_name):
// 1-15 bytes, not "." or "..", no '/', ':' or white space.
func validIfName(s string) bool {
	return s != "" && len(s) <= 15 && s != "." && s != ".." && !strings.ContainsAny(s, "/: \t\n\v\f\r")
}

// FuzzAnnouncerFlags feeds arbitrary values to the announcer's flags that
// are parsed (--labels, --router-id, --grace, --keep-routes-on-exit,
// --local-addresses-device, --bgp-hostname, --ipam). Every problem names
// its flag; an accepted configuration has labels with non-empty keys
// without blanks around them, an IPv4 router ID if any, a positive grace,
// a device name the kernel takes and a host name of at most 64 bytes.
func FuzzAnnouncerFlags(f *testing.F) {
	f.Fuzz(func(t *testing.T, labels, routerID, grace, keep, device, hostname, ipam string) {
		args := []string{"--tenant=c1", "--labels=" + labels, "--router-id=" + routerID, "--grace=" + grace,
			"--keep-routes-on-exit=" + keep, "--local-addresses-device=" + device, "--bgp-hostname=" + hostname, "--ipam=" + ipam}
		c, err := parseConfig(args, func(string) string { return "" }, "node1")
		if err != nil {
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !strings.Contains(line, "--") {
					t.Fatalf("problem %q does not name its flag", line)
				}
			}
			return
		}
		for k, v := range c.Labels {
			if k == "" || strings.TrimSpace(k) != k || strings.TrimSpace(v) != v {
				t.Fatalf("--labels %q gave label %q=%q", labels, k, v)
			}
		}
		if c.RouterID.IsValid() && !c.RouterID.Is4() {
			t.Fatalf("--router-id %q gave %v", routerID, c.RouterID)
		}
		if c.Grace <= 0 {
			t.Fatalf("--grace %q gave %v", grace, c.Grace)
		}
		if c.LocalDevice != "" && !validIfName(c.LocalDevice) {
			t.Fatalf("--local-addresses-device %q is not an interface name the kernel takes", c.LocalDevice)
		}
		if len(c.BGPHostname) > 64 {
			t.Fatalf("--bgp-hostname %q gave %q", hostname, c.BGPHostname)
		}
		if len(c.IPAM) == 0 {
			t.Fatalf("--ipam %q gave no address", ipam)
		}
		for _, a := range c.IPAM {
			if a == "" || strings.TrimSpace(a) != a {
				t.Fatalf("--ipam %q gave address %q", ipam, a)
			}
		}
	})
}
