package output

import (
	"fmt"
	"io"
	"strings"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// GroupTable writes global groups as a table: NAME ADDRESSES TENANTS
// MEMBERS CREATED. MEMBERS lists each member's tenant, with "(backup)"
// after a backup member.
func GroupTable(w io.Writer, groups []*ipamv1.GlobalGroup) error {
	rows := make([][]string, 0, len(groups))
	for _, g := range groups {
		tenants := make([]string, 0, len(g.GetTenants()))
		for _, t := range g.GetTenants() {
			tenants = append(tenants, strings.TrimPrefix(t, "tenants/"))
		}
		members := make([]string, 0, len(g.GetMembers()))
		for _, m := range g.GetMembers() {
			t, _, _ := strings.Cut(strings.TrimPrefix(m.GetAllocation(), "tenants/"), "/")
			s := t + ":" + m.GetOwner()
			if m.GetRole() == ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP {
				s += " (backup)"
			}
			members = append(members, s)
		}
		rows = append(rows, []string{
			g.GetName(),
			orNone(strings.Join(g.GetAddresses(), ",")),
			orNone(strings.Join(tenants, ",")),
			fmt.Sprintf("%d %s", len(members), strings.Join(members, ",")),
			Timestamp(g.GetCreateTime()),
		})
	}
	return writeRows(w, []string{"NAME", "ADDRESSES", "TENANTS", "MEMBERS", "CREATED"}, rows)
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
