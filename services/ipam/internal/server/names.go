package server

import (
	"strconv"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// validID reports whether s is a resource ID: 1-63 lower-case letters,
// digits and '-', starting with a letter and not ending with '-'.
func validID(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// validTenant reports whether s is a tenant ID: as validID, but it may
// also start with a digit (cluster names often do).
func validTenant(s string) bool {
	return s != "" && (s[0] >= 'a' && s[0] <= 'z' || s[0] >= '0' && s[0] <= '9') && validID("t"+s[1:])
}

const idRule = "must be 1-63 lower-case letters, digits and '-', starting with a letter"

// parsePoolName returns the ID of "pools/{pool}".
func parsePoolName(fes *ipam.FieldErrors, field, name string) string {
	id, ok := strings.CutPrefix(name, "pools/")
	if !ok || !validID(id) {
		fes.Add(field, "must be pools/{pool}, where {pool} %s", idRule)
		return ""
	}
	return id
}

// parseParent returns the tenant of "tenants/{tenant}"; "-" when wildcard.
func parseParent(fes *ipam.FieldErrors, field, parent string, wildcard bool) string {
	t, ok := strings.CutPrefix(parent, "tenants/")
	if ok && wildcard && t == "-" {
		return t
	}
	if !ok || !validTenant(t) {
		if wildcard {
			fes.Add(field, "must be tenants/{tenant} or tenants/-, where {tenant} is 1-63 lower-case letters, digits and '-'")
		} else {
			fes.Add(field, "must be tenants/{tenant}, where {tenant} is 1-63 lower-case letters, digits and '-'")
		}
		return ""
	}
	return t
}

// parseAllocationName returns the tenant and ID of
// "tenants/{tenant}/allocations/{allocation}".
func parseAllocationName(fes *ipam.FieldErrors, field, name string) (string, string) {
	rest, ok := strings.CutPrefix(name, "tenants/")
	t, id, ok2 := strings.Cut(rest, "/allocations/")
	if !ok || !ok2 || !validTenant(t) || !validAllocID(id) {
		fes.Add(field, "must be tenants/{tenant}/allocations/{allocation}")
		return "", ""
	}
	return t, id
}

func validAllocID(id string) bool {
	if len(id) != 21 || id[0] != 'a' {
		return false
	}
	for i := 1; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allocationName(a *ipam.Allocation) string {
	return "tenants/" + a.Tenant + "/allocations/" + a.ID
}

// etag renders a revision.
func etag(rev int64) string { return `"` + strconv.FormatInt(rev, 36) + `"` }

// parseEtag reads a revision back (0 for ""). An etag is taken with or
// without its quotes, and only as etag writes it: "0a" or "A" are not
// etags, so that one revision has one spelling.
func parseEtag(fes *ipam.FieldErrors, field, s string) int64 {
	if s == "" {
		return 0
	}
	bare := s
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		bare = s[1 : len(s)-1]
	}
	v, err := strconv.ParseInt(bare, 36, 64)
	if err != nil || v <= 0 || strconv.FormatInt(v, 36) != bare {
		fes.Add(field, "is not an etag returned by this API")
		return 0
	}
	return v
}

// pageSize checks a page_size: default 100, at most 1000.
func pageSize(fes *ipam.FieldErrors, field string, n int32) int {
	switch {
	case n < 0:
		fes.Add(field, "must not be negative")
		return 0
	case n == 0:
		return 100
	case n > 1000:
		return 1000
	}
	return int(n)
}

// validRequestID checks a request_id: at most 128 characters of letters,
// digits, '-', '_' and '.'.
func validRequestID(fes *ipam.FieldErrors, field, s string) {
	if len(s) > 128 {
		fes.Add(field, "must be at most 128 characters")
		return
	}
	for i := range len(s) {
		c := s[i]
		if !requestIDByte(c) {
			fes.Add(field, "may contain only letters, digits, '-', '_' and '.'")
			return
		}
	}
}

// printable checks a free-form identifier such as an owner.
func printable(fes *ipam.FieldErrors, field, s string, maxLen int, required bool) {
	switch {
	case s == "" && required:
		fes.Add(field, "is required")
	case len(s) > maxLen:
		fes.Add(field, "must be at most %d bytes", maxLen)
	default:
		for i := range len(s) {
			if s[i] < 0x21 || s[i] > 0x7e {
				fes.Add(field, "must be printable ASCII without spaces")
				return
			}
		}
	}
}

func requestIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}
