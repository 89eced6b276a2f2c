package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// resourceKind is what the get, list, create, update and delete commands of
// one kind of resource share: the client to call it with, its name for
// -o name, and its table. Each command builds its request; the kind dials,
// calls with the call timeout, and prints the answer in the selected format.
type resourceKind[C any, M proto.Message] struct {
	// client makes the service's client on a connection.
	client func(grpc.ClientConnInterface) C
	// name is the resource's name, as -o name prints it.
	name func(M) string
	// table writes resources as a table.
	table func(io.Writer, []M) error
}

// callOnce dials, makes one call with the call timeout, and closes the
// connection.
func callOnce[C, R any](ctx context.Context, g *globals, k func(grpc.ClientConnInterface) C, do func(ctx context.Context, c C) (R, error)) (R, error) {
	conn, err := g.dial()
	if err != nil {
		var zero R
		return zero, err
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := g.callContext(ctx)
	defer cancel()
	return do(ctx, k(conn))
}

// one makes one call that answers one resource, and prints it.
func (k resourceKind[C, M]) one(cmd *cobra.Command, g *globals, do func(ctx context.Context, c C) (M, error)) error {
	m, err := callOnce(cmd.Context(), g, k.client, do)
	if err != nil {
		return err
	}
	return k.print(g, cmd.OutOrStdout(), m)
}

// print writes one resource in the selected format.
func (k resourceKind[C, M]) print(g *globals, w io.Writer, m M) error {
	return printOne(g, w, m, k.name, k.table)
}

// list fetches the pages (--all, --page-size, --page-token) and prints
// the resources.
func (k resourceKind[C, M]) list(cmd *cobra.Command, g *globals, pages *pageFlags, fetch func(ctx context.Context, c C, token string) ([]M, string, error)) error {
	conn, err := g.dial()
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	c := k.client(conn)
	ms, err := fetchPages(cmd.Context(), g, pages, func(ctx context.Context, token string) ([]M, string, error) {
		return fetch(ctx, c, token)
	})
	if err != nil {
		return err
	}
	return printList(g, cmd.OutOrStdout(), ms, k.name, k.table)
}

// remove makes a delete call for name and prints what was deleted.
func (k resourceKind[C, M]) remove(cmd *cobra.Command, g *globals, name string, do func(ctx context.Context, c C) (proto.Message, error)) error {
	resp, err := callOnce(cmd.Context(), g, k.client, do)
	if err != nil {
		return err
	}
	return printDeleted(g, cmd.OutOrStdout(), name, resp)
}

// getCommand makes cmd (Use, Short, Example set) "get NAME": parse turns
// the argument into the resource name, get fetches it.
func (k resourceKind[C, M]) getCommand(g *globals, cmd *cobra.Command, arg string, parse func(string) (string, error), get func(ctx context.Context, c C, name string) (M, error)) *cobra.Command {
	cmd.Args = exactArgs(arg)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name, err := parse(args[0])
		if err != nil {
			return err
		}
		return k.one(cmd, g, func(ctx context.Context, c C) (M, error) { return get(ctx, c, name) })
	}
	return cmd
}

// deleteCommand makes cmd (Use, Short, Example set) "delete NAME": parse
// turns the argument into the resource name, del deletes it.
func (k resourceKind[C, M]) deleteCommand(g *globals, cmd *cobra.Command, arg string, parse func(string) (string, error), del func(ctx context.Context, c C, name string) (proto.Message, error)) *cobra.Command {
	cmd.Args = exactArgs(arg)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name, err := parse(args[0])
		if err != nil {
			return err
		}
		return k.remove(cmd, g, name, func(ctx context.Context, c C) (proto.Message, error) { return del(ctx, c, name) })
	}
	return cmd
}

// etagFlags registers --etag and --request-id on a command that changes
// one resource; what names it in --etag's help ("the tenant").
func etagFlags(cmd *cobra.Command, what string, etag, requestID *string) *cobra.Command {
	fs := cmd.Flags()
	fs.StringVar(etag, "etag", "", "fail with Aborted unless "+what+" still has this `ETAG`")
	fs.StringVar(requestID, "request-id", "", "`ID` that makes retries safe")
	return cmd
}
