package output

import (
	"fmt"
	"io"
	"strings"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// TenantTable writes tenants as a table: NAME DISPLAY-NAME ADDRESSES(USED/MAX)
// CREATED. Addresses kept for released owners show as "+N held" after the
// used ones (both count against the quota); a tenant without a quota shows
// its maximum as "unlimited".
func TenantTable(w io.Writer, tenants []*ipamv1.Tenant) error {
	rows := make([][]string, 0, len(tenants))
	for _, t := range tenants {
		limit := "unlimited"
		if m := t.GetMaxAddresses(); m != 0 {
			limit = fmt.Sprint(m)
		}
		used := fmt.Sprint(t.GetAddressesUsed())
		if h := t.GetAddressesHeld(); h != 0 {
			used += fmt.Sprintf("+%d held", h)
		}
		rows = append(rows, []string{
			t.GetName(),
			t.GetDisplayName(),
			used + "/" + limit,
			Timestamp(t.GetCreateTime()),
		})
	}
	return writeRows(w, []string{"NAME", "DISPLAY-NAME", "ADDRESSES(USED/MAX)", "CREATED"}, rows)
}

// Role is a token role as the CLI spells it: "admin", "tenant", "announcer"
// or "viewer".
func Role(r ipamv1.Role) string {
	if r == ipamv1.Role_ROLE_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_"))
}

// TokenTable writes tokens as a table: NAME ROLE TENANT EXPIRES CREATED
// DESCRIPTION. A token that never expires shows EXPIRES as "never".
func TokenTable(w io.Writer, tokens []*ipamv1.Token) error {
	rows := make([][]string, 0, len(tokens))
	for _, t := range tokens {
		expires := "never"
		if t.GetExpireTime() != nil {
			expires = Timestamp(t.GetExpireTime())
		}
		rows = append(rows, []string{
			t.GetName(),
			Role(t.GetRole()),
			t.GetTenant(),
			expires,
			Timestamp(t.GetCreateTime()),
			t.GetDescription(),
		})
	}
	return writeRows(w, []string{"NAME", "ROLE", "TENANT", "EXPIRES", "CREATED", "DESCRIPTION"}, rows)
}
