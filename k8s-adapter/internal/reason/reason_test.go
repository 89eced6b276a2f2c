package reason

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"testing"
)

// TestTable checks that every reason constant is in the table, is CamelCase
// and says what it means.
func TestTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "reason.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				consts++
				if _, ok := meaning[n.Name]; !ok {
					t.Errorf("reason %s is not in the table", n.Name)
				}
			}
		}
	}
	if consts != len(meaning) {
		t.Errorf("%d constants, %d reasons in the table", consts, len(meaning))
	}
	camel := regexp.MustCompile(`^[A-Z][a-z0-9]*(?:[A-Z]+[a-z0-9]*)*$`)
	for r, m := range meaning {
		if !camel.MatchString(r) {
			t.Errorf("reason %q is not CamelCase", r)
		}
		if m == "" {
			t.Errorf("reason %q has no meaning", r)
		}
	}
}
