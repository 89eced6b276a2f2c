package filter

// isIdent reports whether s is a plain field name: [a-z_][a-z0-9_]*.
func isIdent(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLowerOrDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

// isKey reports whether s can be a label key: non-empty, of letters, digits
// and - _ . /. Whether it is a valid Kubernetes key is not checked; a filter
// on an impossible key simply matches no labels.
func isKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isKeyByte(s[i]) {
			return false
		}
	}
	return true
}

// isWordByte reports whether c can be in a field name or keyword.
func isWordByte(c byte) bool {
	return isLowerOrDigit(c) || 'A' <= c && c <= 'Z' || c == '_'
}

// isKeyByte reports whether c can be in a bare label key.
func isKeyByte(c byte) bool {
	return isWordByte(c) || c == '-' || c == '.' || c == '/'
}

// isBareByte reports whether c can be in a bare value.
func isBareByte(c byte) bool {
	return isKeyByte(c) || c == ':'
}

func isLowerOrDigit(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
}
