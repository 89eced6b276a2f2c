package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
)

// exactArgs accepts exactly the named positional arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return fmt.Errorf("%s: missing %s\nRun '%s --help' for usage", cmd.CommandPath(), names[len(args)], cmd.CommandPath())
		case len(args) > len(names):
			return fmt.Errorf("%s: unexpected argument %q\nRun '%s --help' for usage", cmd.CommandPath(), args[len(names)], cmd.CommandPath())
		}
		return nil
	}
}

// printOne writes one resource in the selected format.
func printOne[M proto.Message](g *globals, w io.Writer, m M, name func(M) string, table func(io.Writer, []M) error) error {
	switch g.output {
	case output.JSON:
		return output.WriteJSON(w, m)
	case output.Name:
		return output.WriteNames(w, name(m))
	default:
		return table(w, []M{m})
	}
}

// printList writes resources in the selected format.
func printList[M proto.Message](g *globals, w io.Writer, ms []M, name func(M) string, table func(io.Writer, []M) error) error {
	switch g.output {
	case output.JSON:
		return output.WriteJSONList(w, ms)
	case output.Name:
		for _, m := range ms {
			if err := output.WriteNames(w, name(m)); err != nil {
				return err
			}
		}
		return nil
	default:
		return table(w, ms)
	}
}

// pageFlags are the paging flags of the list commands.
type pageFlags struct {
	size  int32
	token string
	all   bool
}

func (p *pageFlags) register(fs *pflag.FlagSet, what string) {
	fs.Int32Var(&p.size, "page-size", 0, "ask for at most `N` "+what+" per call (0: the server's default, 100)")
	fs.StringVar(&p.token, "page-token", "", "start from this `TOKEN`, printed by an earlier --all=false run")
	fs.BoolVar(&p.all, "all", true, "fetch every page; --all=false fetches one page and prints the next page token on stderr")
}

// fetchPages calls fetch for one page, or for every page with --all, and
// returns the items in order. With --all=false it tells on stderr how to get
// the next page.
func fetchPages[M any](ctx context.Context, g *globals, p *pageFlags, fetch func(ctx context.Context, token string) ([]M, string, error)) ([]M, error) {
	if p.size < 0 {
		return nil, fmt.Errorf("--page-size must not be negative")
	}
	var all []M
	token := p.token
	seen := map[string]bool{}
	for {
		callCtx, cancel := g.callContext(ctx)
		items, next, err := fetch(callCtx, token)
		cancel()
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		if !p.all {
			fmt.Fprintf(g.env.Stderr, "more results: run again with --page-token %s\n", next)
			return all, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("the server returned page token %q twice; stopping", next)
		}
		seen[next] = true
		token = next
	}
}
