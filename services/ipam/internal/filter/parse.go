package filter

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits on what Parse accepts.
const (
	// MaxLength is the longest filter Parse accepts, in bytes.
	MaxLength = 2048
	// MaxTerms is the most terms Parse accepts.
	MaxTerms = 32
)

// Parse parses the filter s. fields are the plain field names the caller
// supports; terms on labels.KEY are accepted only if fields includes
// "labels". An empty or all-blank s gives the zero Filter, which matches
// everything. Every error is a *SyntaxError; a filter longer than MaxLength
// bytes or with more than MaxTerms terms is an error.
func Parse(s string, fields ...string) (Filter, error) {
	if len(s) > MaxLength {
		return Filter{}, &SyntaxError{
			Pos:    MaxLength,
			Reason: fmt.Sprintf("filter is %d bytes long; the limit is %d", len(s), MaxLength),
		}
	}
	return parse(s, fields)
}

// parse is Parse without the length limit.
func parse(s string, fields []string) (Filter, error) {
	if !utf8.ValidString(s) {
		return Filter{}, &SyntaxError{Pos: firstInvalidUTF8(s), Reason: "invalid UTF-8"}
	}
	p := &parser{s: s, fields: fields}
	p.skipSpace()
	if p.eof() {
		return Filter{}, nil
	}
	var terms []Term
	for {
		if len(terms) == MaxTerms {
			return Filter{}, p.errorf(p.pos, "more than %d terms", MaxTerms)
		}
		t, err := p.term()
		if err != nil {
			return Filter{}, err
		}
		terms = append(terms, t)
		p.skipSpace()
		if p.eof() {
			return Filter{Terms: terms}, nil
		}
		if p.word() != "AND" {
			return Filter{}, p.errorf(p.pos, `expected "AND" or end of filter`)
		}
		p.pos += len("AND")
		p.skipSpace()
	}
}

// parser reads one filter; pos is the offset of the next byte to read.
type parser struct {
	s      string
	pos    int
	fields []string
}

// term reads FIELD OP VALUE, or FIELD:*.
func (p *parser) term() (Term, error) {
	start := p.pos
	name := p.word()
	if name == "" {
		return Term{}, p.errorf(start, "expected field name")
	}
	if !isIdent(name) || !slices.Contains(p.fields, name) {
		return Term{}, p.errorf(start, "unknown field %q; %s", name, p.allowed())
	}
	p.pos += len(name)
	t := Term{Field: name}
	if name == labelsField {
		key, err := p.labelKey()
		if err != nil {
			return Term{}, err
		}
		t.Key = key
	}

	p.skipSpace()
	switch {
	case strings.HasPrefix(p.s[p.pos:], "="):
		t.Op = Equal
	case strings.HasPrefix(p.s[p.pos:], "!="):
		t.Op = NotEqual
	case strings.HasPrefix(p.s[p.pos:], ":"):
		t.Op = Has
	default:
		return Term{}, p.errorf(p.pos, `expected "=", "!=" or ":"`)
	}
	p.pos += len(t.Op.String())
	p.skipSpace()

	if t.Op == Has {
		if !strings.HasPrefix(p.s[p.pos:], "*") {
			return Term{}, p.errorf(p.pos, `expected "*" after ":"`)
		}
		p.pos++
		return t, nil
	}
	v, err := p.value()
	if err != nil {
		return Term{}, err
	}
	t.Value = v
	return t, nil
}

// labelKey reads ".KEY" or `."KEY"` after "labels".
func (p *parser) labelKey() (string, error) {
	if !strings.HasPrefix(p.s[p.pos:], ".") {
		return "", p.errorf(p.pos, `expected "." and a label key after "labels"`)
	}
	p.pos++
	start := p.pos
	isQuoted := strings.HasPrefix(p.s[p.pos:], `"`)
	var key string
	if isQuoted {
		k, err := p.quoted()
		if err != nil {
			return "", err
		}
		key = k
	} else {
		key = p.run(isKeyByte)
		p.pos += len(key)
	}
	switch {
	case key == "" && !isQuoted:
		return "", p.errorf(start, "expected label key")
	case !isKey(key):
		return "", p.errorf(start, "invalid label key %q: want letters, digits and - _ . /", key)
	}
	return key, nil
}

// value reads a quoted string or a bare word.
func (p *parser) value() (string, error) {
	if strings.HasPrefix(p.s[p.pos:], `"`) {
		return p.quoted()
	}
	v := p.run(isBareByte)
	switch v {
	case "":
		return "", p.errorf(p.pos, "expected value")
	case "AND":
		return "", p.errorf(p.pos, `expected value; write "AND" quoted to compare with it`)
	}
	p.pos += len(v)
	return v, nil
}

// quoted reads a double-quoted string at p.pos and returns it unescaped.
func (p *parser) quoted() (string, error) {
	start := p.pos
	var b strings.Builder
	for i := start + 1; i < len(p.s); i++ {
		switch c := p.s[i]; c {
		case '"':
			p.pos = i + 1
			return b.String(), nil
		case '\\':
			if i+1 == len(p.s) {
				return "", p.errorf(start, "unterminated string")
			}
			if n := p.s[i+1]; n != '"' && n != '\\' {
				return "", p.errorf(i, `invalid escape; only \" and \\ are allowed`)
			}
			i++
			b.WriteByte(p.s[i])
		default:
			b.WriteByte(c)
		}
	}
	return "", p.errorf(start, "unterminated string")
}

// word returns the run of letters, digits and underscores at p.pos, without
// consuming it.
func (p *parser) word() string {
	return p.run(isWordByte)
}

// run returns the longest prefix of the rest of the input whose bytes all
// satisfy ok, without consuming it.
func (p *parser) run(ok func(byte) bool) string {
	i := p.pos
	for i < len(p.s) && ok(p.s[i]) {
		i++
	}
	return p.s[p.pos:i]
}

func (p *parser) skipSpace() {
	for !p.eof() && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *parser) eof() bool { return p.pos >= len(p.s) }

func (p *parser) errorf(pos int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Pos: pos, Reason: fmt.Sprintf(format, args...)}
}

// allowed describes the fields the caller supports, for error messages.
func (p *parser) allowed() string {
	var names []string
	for _, f := range p.fields {
		if f == labelsField {
			f = labelsField + ".KEY"
		}
		names = append(names, f)
	}
	if len(names) == 0 {
		return "this list cannot be filtered"
	}
	return "allowed: " + strings.Join(names, ", ")
}

// firstInvalidUTF8 returns the offset of the first byte of s that is not
// part of a valid UTF-8 encoding.
func firstInvalidUTF8(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i
			}
		}
	}
	return len(s)
}
