package filter

import "strconv"

// SyntaxError is why Parse rejected a filter, and where.
type SyntaxError struct {
	// Pos is the byte offset in the filter, counting from 0, at which the
	// problem was found: the filter's length if it ended too early, and
	// MaxLength if it is too long.
	Pos int
	// Reason says what is wrong, e.g. `expected "=", "!=" or ":"`.
	Reason string
}

// Error returns "filter: at POS: REASON".
func (e *SyntaxError) Error() string {
	return "filter: at " + strconv.Itoa(e.Pos) + ": " + e.Reason
}
