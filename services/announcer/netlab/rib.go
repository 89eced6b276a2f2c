package netlab

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Path is one route in a router's BGP table, as its own CLI shows it.
type Path struct {
	Prefix           netip.Prefix
	NextHop          netip.Addr
	ASPath           string   // space-separated AS numbers, "" when empty
	LocalPref        uint32   // 0 when the router does not show one
	Communities      []string // "65000:100", sorted
	LargeCommunities []string // "1:2:3", sorted
	Best             bool
	Stale            bool // kept through a peer's graceful restart
}

// RIB maps each prefix to the paths a router holds for it.
type RIB map[netip.Prefix][]Path

// Router is a running BGP router whose table a test can read.
type Router interface {
	// Name says which router this is, for messages.
	Name() string
	// RIB reads the router's BGP table, IPv4 and IPv6 unicast.
	RIB(ctx context.Context) (RIB, error)
}

// Best returns the best path for p, or false when the router has none.
func (r RIB) Best(p netip.Prefix) (Path, bool) {
	paths := r[p]
	for _, x := range paths {
		if x.Best {
			return x, true
		}
	}
	if len(paths) == 1 {
		return paths[0], true
	}
	return Path{}, false
}

func (p Path) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s via %s as-path[%s]", p.Prefix, p.NextHop, p.ASPath)
	if p.LocalPref != 0 {
		fmt.Fprintf(&b, " local-pref %d", p.LocalPref)
	}
	if len(p.Communities) > 0 {
		fmt.Fprintf(&b, " communities %v", p.Communities)
	}
	if len(p.LargeCommunities) > 0 {
		fmt.Fprintf(&b, " large %v", p.LargeCommunities)
	}
	if p.Stale {
		b.WriteString(" stale")
	}
	return b.String()
}

// WaitPath polls r until its best path for prefix satisfies ok (nil: any
// path) and returns it.
func WaitPath(ctx context.Context, r Router, prefix netip.Prefix, timeout time.Duration, ok func(Path) error) (Path, error) {
	var got Path
	err := Eventually(ctx, timeout, 20*time.Millisecond, func(ctx context.Context) error {
		rib, err := r.RIB(ctx)
		if err != nil {
			return err
		}
		p, found := rib.Best(prefix)
		if !found {
			return fmt.Errorf("%s has no path for %s", r.Name(), prefix)
		}
		if ok != nil {
			if err := ok(p); err != nil {
				return fmt.Errorf("%s: %s: %w", r.Name(), p, err)
			}
		}
		got = p
		return nil
	})
	return got, err
}

// WaitNoPath polls r until it holds no path for prefix.
func WaitNoPath(ctx context.Context, r Router, prefix netip.Prefix, timeout time.Duration) error {
	return Eventually(ctx, timeout, 20*time.Millisecond, func(ctx context.Context) error {
		rib, err := r.RIB(ctx)
		if err != nil {
			return err
		}
		if paths := rib[prefix]; len(paths) > 0 {
			return fmt.Errorf("%s still has %v", r.Name(), paths)
		}
		return nil
	})
}

func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
