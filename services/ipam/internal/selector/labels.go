package selector

import "strings"

// Limits on label keys and values, as in Kubernetes.
const (
	maxPrefixLen = 253 // DNS subdomain prefix of a key
	maxNameLen   = 63  // name part of a key, and a value
)

// keyProblem says why k is not a valid label key, or returns "" if it is. A
// key is a name, optionally prefixed by a DNS subdomain and "/".
func keyProblem(k string) string {
	if k == "" {
		return "must not be empty"
	}
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		return nameProblem(k)
	}
	if strings.Contains(name, "/") {
		return `must be a name, optionally prefixed by a DNS subdomain and "/"`
	}
	if prefix == "" {
		return `prefix before "/" must not be empty`
	}
	if len(prefix) > maxPrefixLen {
		return "prefix must be at most 253 characters"
	}
	if !isDNSSubdomain(prefix) {
		return "prefix must be a lowercase DNS subdomain such as example.com"
	}
	return nameProblem(name)
}

// nameProblem says why n is not a valid name part of a label key.
func nameProblem(n string) string {
	switch {
	case n == "":
		return "name must not be empty"
	case len(n) > maxNameLen:
		return "name must be at most 63 characters"
	case !isToken(n):
		return "name must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"
	}
	return ""
}

// valueProblem says why v is not a valid label value, or returns "" if it is.
func valueProblem(v string) string {
	switch {
	case len(v) > maxNameLen:
		return "must be at most 63 characters"
	case v != "" && !isToken(v):
		return "must be empty or consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"
	}
	return ""
}

// isToken reports whether s is non-empty, consists of ASCII alphanumerics,
// '-', '_' and '.', and starts and ends with an alphanumeric.
func isToken(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// isDNSSubdomain reports whether s is a sequence of dot-separated RFC 1123
// labels: lowercase alphanumerics and '-', each starting and ending with an
// alphanumeric. The caller checks the overall length.
func isDNSSubdomain(s string) bool {
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || !isLowerAlnum(label[0]) || !isLowerAlnum(label[len(label)-1]) {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !isLowerAlnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return isLowerAlnum(c) || 'A' <= c && c <= 'Z'
}

func isLowerAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
}
