package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestTenantCommands(t *testing.T) {
	f, addr := newIPAM(t).record(t)
	steps := []struct {
		args       []string
		wantStdout string
		wantErr    string
	}{
		{
			args: []string{"tenant", "create", "acme", "--display-name", "ACME prod", "--max-addresses", "64"},
			wantStdout: "NAME           DISPLAY-NAME   ADDRESSES(USED/MAX)   CREATED\n" +
				"tenants/acme   ACME prod      0/64                  TIME\n",
		},
		{
			args: []string{"tenant", "create", "tenants/lab"},
			wantStdout: "NAME          DISPLAY-NAME   ADDRESSES(USED/MAX)   CREATED\n" +
				"tenants/lab   -              0/unlimited           TIME\n",
		},
		{args: []string{"tenant", "list", "-o", "name"}, wantStdout: "tenants/acme\ntenants/lab\n"},
		{args: []string{"tenant", "get", "acme", "-o", "name"}, wantStdout: "tenants/acme\n"},
		{args: []string{"tenant", "update", "acme", "--max-addresses", "0", "-o", "name"}, wantStdout: "tenants/acme\n"},
		{args: []string{"tenant", "update", "acme"}, wantErr: "nothing to update"},
		{args: []string{"tenant", "get", "-"}, wantErr: "cannot name one tenant"},
		{args: []string{"tenant", "delete", "acme"}, wantStdout: "deleted tenants/acme\n"},
		{args: []string{"tenant", "get", "acme"}, wantErr: "NotFound"},
	}
	for _, s := range steps {
		res := runAt(t, addr, s.args...)
		if s.wantErr != "" {
			if res.err == nil || !strings.Contains(output.FormatError(res.err), s.wantErr) {
				t.Errorf("%v: error %v, want one containing %q", s.args, res.err, s.wantErr)
			}
			continue
		}
		if res.err != nil {
			t.Fatalf("%v: %s", s.args, output.FormatError(res.err))
		}
		if diff := cmp.Diff(s.wantStdout, normalize(res.stdout)); diff != "" {
			t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
		}
	}
	var update *ipamv1.UpdateTenantRequest
	for _, r := range f.recorded() {
		if u, ok := r.(*ipamv1.UpdateTenantRequest); ok {
			update = u
		}
	}
	want := &ipamv1.UpdateTenantRequest{
		Tenant:     &ipamv1.Tenant{Name: "tenants/acme"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_addresses"}},
	}
	if diff := cmp.Diff(want, update, protocmp.Transform()); diff != "" {
		t.Errorf("UpdateTenant request (-want +got):\n%s", diff)
	}
}

func TestTokenCommands(t *testing.T) {
	f, addr := newIPAM(t).record(t)
	secretLine := regexp.MustCompile(`\nsecret: bct_\S+\n$`)
	before := time.Now()
	res := runAt(t, addr, "token", "create", "acme-cluster", "--role", "tenant", "--tenant", "acme", "--expires", "720h", "--description", "acme's cluster")
	if res.err != nil {
		t.Fatal(output.FormatError(res.err))
	}
	if !secretLine.MatchString(res.stdout) || !strings.Contains(res.stdout, "tokens/acme-cluster   tenant   tenants/acme") {
		t.Errorf("stdout %q, want the token and its secret", res.stdout)
	}
	if !strings.Contains(res.stderr, "warning: this is the only time the secret of tokens/acme-cluster is shown") {
		t.Errorf("stderr %q, want a warning that the secret is shown once", res.stderr)
	}
	create := f.recorded()[0].(*ipamv1.CreateTokenRequest)
	wantCreate := &ipamv1.CreateTokenRequest{
		TokenId: "acme-cluster",
		Token:   &ipamv1.Token{Role: ipamv1.Role_ROLE_TENANT, Tenant: "tenants/acme", Description: "acme's cluster"},
	}
	if diff := cmp.Diff(wantCreate, create, protocmp.Transform(), protocmp.IgnoreFields(&ipamv1.Token{}, "expire_time")); diff != "" {
		t.Errorf("CreateToken request (-want +got):\n%s", diff)
	}
	if exp := create.GetToken().GetExpireTime().AsTime(); exp.Before(before.Add(720*time.Hour)) || exp.After(time.Now().Add(720*time.Hour)) {
		t.Errorf("expire_time %v, want 720h from now", exp)
	}

	res = runAt(t, addr, "token", "create", "grafana", "--role", "viewer", "-o", "json")
	if res.err != nil || !strings.Contains(res.stdout, `"secret": "bct_`) || !strings.Contains(res.stdout, `"role": "ROLE_VIEWER"`) {
		t.Errorf("token create -o json: %v\n%s", res.err, res.stdout)
	}
	if !strings.Contains(res.stderr, "cannot be shown again") {
		t.Errorf("token create -o json: stderr %q, want the warning", res.stderr)
	}

	for _, s := range []struct {
		args       []string
		wantStdout string
		wantErr    string
	}{
		{args: []string{"token", "list", "-o", "name"}, wantStdout: "tokens/acme-cluster\ntokens/grafana\n"},
		{args: []string{"token", "get", "tokens/grafana", "-o", "name"}, wantStdout: "tokens/grafana\n"},
		{args: []string{"token", "delete", "grafana"}, wantStdout: "deleted tokens/grafana\n"},
		{args: []string{"token", "revoke", "acme-cluster", "-o", "name"}, wantStdout: "tokens/acme-cluster\n"},
		{args: []string{"token", "list"}, wantStdout: "NAME   ROLE   TENANT   EXPIRES   CREATED   DESCRIPTION\n"},
		{args: []string{"token", "create", "x"}, wantErr: "needs --role"},
		{args: []string{"token", "create", "x", "--role", "root"}, wantErr: `unknown --role "root"`},
		{args: []string{"token", "create", "x", "--role", "announcer"}, wantErr: "announcer tokens need --tenant"},
		{args: []string{"token", "create", "x", "--role", "admin", "--tenant", "acme"}, wantErr: "drop --tenant"},
		{args: []string{"token", "create", "x", "--role", "admin", "--expires", "-1h"}, wantErr: "--expires must not be negative"},
		{args: []string{"token", "create", "x", "--role", "admin", "-o", "name"}, wantErr: "lose the secret"},
	} {
		res := runAt(t, addr, s.args...)
		if s.wantErr != "" {
			if res.err == nil || !strings.Contains(output.FormatError(res.err), s.wantErr) {
				t.Errorf("%v: error %v, want one containing %q", s.args, res.err, s.wantErr)
			}
			continue
		}
		if res.err != nil {
			t.Fatalf("%v: %s", s.args, output.FormatError(res.err))
		}
		if diff := cmp.Diff(s.wantStdout, normalize(res.stdout)); diff != "" {
			t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
		}
	}
}
