package server

import (
	"strconv"
	"strings"
)

// communityProblem returns why s is not a community value ("A:B" with
// 16-bit parts, or "large:A:B:C" with 32-bit parts), or "" if it is one.
func communityProblem(s string) string {
	if rest, ok := strings.CutPrefix(s, "large:"); ok {
		parts := strings.Split(rest, ":")
		if len(parts) != 3 {
			return "a large community is large:A:B:C"
		}
		for _, p := range parts {
			if _, err := strconv.ParseUint(p, 10, 32); err != nil {
				return "each part of a large community is a number from 0 to 4294967295"
			}
		}
		return ""
	}
	parts := strings.Split(s, ":")
	if len(parts) != 2 {
		return "a community is A:B, large:A:B:C, or the name of a Community alias"
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return "each part of a community is a number from 0 to 65535"
		}
	}
	return ""
}
