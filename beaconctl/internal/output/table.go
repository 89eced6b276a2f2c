package output

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// none stands for an empty cell, so that columns stay aligned and a cell can
// be told apart from its neighbours.
const none = "-"

func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
}

func writeRows(w io.Writer, header []string, rows [][]string) error {
	tw := newTabWriter(w)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		for i, c := range r {
			if c == "" {
				r[i] = none
			}
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// PoolTable writes pools as a table: NAME RANGES AUTO IPV4(USED/SIZE)
// IPV6(USED/SIZE) PRIORITY.
func PoolTable(w io.Writer, pools []*ipamv1.Pool) error {
	rows := make([][]string, 0, len(pools))
	for _, p := range pools {
		priority := ""
		if pr := p.GetAllocationPolicy().GetPriority(); pr != 0 {
			priority = fmt.Sprint(pr)
		}
		rows = append(rows, []string{
			p.GetName(),
			strings.Join(p.GetRanges(), ","),
			fmt.Sprint(AutoAssign(p)),
			familyUsage(p, ipamv1.IPFamily_IP_FAMILY_IPV4),
			familyUsage(p, ipamv1.IPFamily_IP_FAMILY_IPV6),
			priority,
		})
	}
	return writeRows(w, []string{"NAME", "RANGES", "AUTO", "IPV4(USED/SIZE)", "IPV6(USED/SIZE)", "PRIORITY"}, rows)
}

// AutoAssign reports whether p is used for allocations that do not name it:
// unset means true.
func AutoAssign(p *ipamv1.Pool) bool {
	return p.AutoAssign == nil || p.GetAutoAssign()
}

func familyUsage(p *ipamv1.Pool, f ipamv1.IPFamily) string {
	for _, u := range p.GetStatus().GetFamilies() {
		if u.GetFamily() == f {
			size := u.GetSize()
			if size == "" {
				size = "?"
			}
			return fmt.Sprintf("%d/%s", u.GetUsed(), size)
		}
	}
	return ""
}

// AllocationTable writes allocations as a table: NAME OWNER ADDRESSES POOL
// EXPIRES.
func AllocationTable(w io.Writer, allocs []*ipamv1.Allocation) error {
	rows := make([][]string, 0, len(allocs))
	for _, a := range allocs {
		rows = append(rows, []string{
			a.GetName(),
			a.GetOwner(),
			strings.Join(a.GetAddresses(), ","),
			a.GetPool(),
			Timestamp(a.GetExpireTime()),
		})
	}
	return writeRows(w, []string{"NAME", "OWNER", "ADDRESSES", "POOL", "EXPIRES"}, rows)
}

// HoldTable writes holds (released owners' kept addresses) as a table:
// OWNER ADDRESSES POOL HELD-UNTIL.
func HoldTable(w io.Writer, holds []*ipamv1.Allocation) error {
	rows := make([][]string, 0, len(holds))
	for _, a := range holds {
		rows = append(rows, []string{
			a.GetOwner(),
			strings.Join(a.GetAddresses(), ","),
			a.GetPool(),
			Timestamp(a.GetHoldExpireTime()),
		})
	}
	return writeRows(w, []string{"OWNER", "ADDRESSES", "POOL", "HELD-UNTIL"}, rows)
}

// AuditTable writes audit records as a table: TIME ACTION ACTOR OWNER
// ADDRESSES POOL.
func AuditTable(w io.Writer, recs []*ipamv1.AuditRecord) error {
	rows := make([][]string, 0, len(recs))
	for _, r := range recs {
		rows = append(rows, []string{
			Timestamp(r.GetTime()),
			AuditAction(r.GetAction()),
			r.GetActor(),
			r.GetOwner(),
			strings.Join(r.GetAddresses(), ","),
			r.GetPool(),
		})
	}
	return writeRows(w, []string{"TIME", "ACTION", "ACTOR", "OWNER", "ADDRESSES", "POOL"}, rows)
}

// AuditAction is the short name of an audit action: "ALLOCATE" for
// ACTION_ALLOCATE.
func AuditAction(a ipamv1.AuditRecord_Action) string {
	return strings.TrimPrefix(a.String(), "ACTION_")
}

// EventType is the short name of a watch event type: "PUT" for TYPE_PUT.
func EventType(t ipamv1.AllocationEvent_Type) string {
	return strings.TrimPrefix(t.String(), "TYPE_")
}

// WatchEventLine writes one watch event as a single line: TYPE NAME OWNER
// ADDRESSES POOL, separated by single spaces, empty fields as "-" and fields
// with blanks (an owner may have them) quoted.
func WatchEventLine(w io.Writer, ev *ipamv1.AllocationEvent) error {
	a := ev.GetAllocation()
	fields := []string{
		EventType(ev.GetType()),
		a.GetName(),
		a.GetOwner(),
		strings.Join(a.GetAddresses(), ","),
		a.GetPool(),
	}
	for i, f := range fields {
		switch {
		case f == "":
			fields[i] = none
		case strings.ContainsAny(f, " \t"):
			fields[i] = strconv.Quote(f)
		}
	}
	_, err := fmt.Fprintln(w, strings.Join(fields, " "))
	return err
}

// Timestamp formats t as RFC 3339 in UTC, to the second; "" when unset.
func Timestamp(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.AsTime().UTC().Truncate(time.Second).Format(time.RFC3339)
}
