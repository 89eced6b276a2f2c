package store

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// MemberStatus is what one etcd member says of its backend database.
type MemberStatus struct {
	// Endpoint is the member's client URL.
	Endpoint string
	// DBSize is the backend file's size in bytes: what counts against the
	// quota. DBSizeInUse is the part holding live data; the rest is free
	// pages that only a defragmentation returns.
	DBSize, DBSizeInUse int64
	// Leader reports whether this member leads the cluster.
	Leader bool
}

// FreeFraction is the share of the member's backend file that is free
// pages (0 when the size is unknown).
func (m MemberStatus) FreeFraction() float64 {
	if m.DBSize <= 0 || m.DBSizeInUse > m.DBSize {
		return 0
	}
	return float64(m.DBSize-m.DBSizeInUse) / float64(m.DBSize)
}

// Health is the state of the etcd cluster's backends.
type Health struct {
	Members []MemberStatus
	// NoSpace reports a NOSPACE alarm: some member's backend passed its
	// quota and etcd refuses every write until it is defragmented (or the
	// quota raised) and the alarm disarmed.
	NoSpace bool
	// Alarms are every alarm raised, as etcd names them ("NOSPACE",
	// "CORRUPT").
	Alarms []string
}

// Health asks every member for its backend's size, and the cluster for
// its alarms. A member that does not answer is left out.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	for _, ep := range c.etcd.Endpoints() {
		st, err := c.etcd.Status(ctx, ep)
		if err != nil {
			continue
		}
		h.Members = append(h.Members, MemberStatus{
			Endpoint: ep, DBSize: st.DbSize, DBSizeInUse: st.DbSizeInUse,
			Leader: st.Header != nil && st.Leader == st.Header.MemberId,
		})
	}
	alarms, err := c.etcd.AlarmList(ctx)
	if err != nil {
		return h, fmt.Errorf("store: etcd alarms: %w: %w", ipam.ErrUnavailable, err)
	}
	for _, a := range alarms.Alarms {
		h.Alarms = append(h.Alarms, a.Alarm.String())
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			h.NoSpace = true
		}
	}
	return h, nil
}

// Defragment defragments the member at endpoint: it rewrites the backend
// file without its free pages. The member answers nothing else while it
// runs (seconds for a gigabyte), so call it for one member at a time.
func (c *Client) Defragment(ctx context.Context, endpoint string) error {
	if _, err := c.etcd.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("store: defragment %s: %w: %w", endpoint, ipam.ErrUnavailable, err)
	}
	return nil
}

// Health is Client.Health for the member in this process, read from it
// directly (an in-process client has no endpoint to ask).
func (e *Embedded) Health(context.Context) (Health, error) {
	srv := e.etcd.Server
	be := srv.Backend()
	h := Health{Members: []MemberStatus{{
		Endpoint: "embedded", DBSize: be.Size(), DBSizeInUse: be.SizeInUse(),
		Leader: srv.Leader() == srv.MemberID(),
	}}}
	for _, a := range srv.Alarms() {
		h.Alarms = append(h.Alarms, a.Alarm.String())
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			h.NoSpace = true
		}
	}
	return h, nil
}

// Defragment defragments the member in this process (endpoint is
// ignored).
func (e *Embedded) Defragment(context.Context, string) error {
	if err := e.etcd.Server.Backend().Defrag(); err != nil {
		return fmt.Errorf("store: defragment the embedded etcd: %w", err)
	}
	return nil
}
