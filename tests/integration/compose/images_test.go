package compose

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestImages checks what `make images` promises of each Beacon image: the
// OCI labels (source, revision, version), the version printed by
// --version matching the label, and the user it runs as (65532; the
// announcer root, to be run with NET_ADMIN and NET_RAW only).
func TestImages(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CONTAINERS_CONF="+filepath.Join(wd, "..", "..", "..", "deploy", "images", "containers.conf"))
	require(t, env)
	podman := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("podman", args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	type want struct{ User, Title, Source string }
	tests := []struct {
		image string
		want  want
	}{
		{"ipamd", want{"65532:65532", "ipamd", "https://github.com/beaconlb/beacon"}},
		{"announcerd", want{"0:0", "announcerd", "https://github.com/beaconlb/beacon"}},
		{"gatewayd", want{"65532:65532", "gatewayd", "https://github.com/beaconlb/beacon"}},
		{"k8s-adapter", want{"65532:65532", "k8s-adapter", "https://github.com/beaconlb/beacon"}},
		{"beaconctl", want{"65532:65532", "beaconctl", "https://github.com/beaconlb/beacon"}},
	}
	for _, tc := range tests {
		t.Run(tc.image, func(t *testing.T) {
			ref := "localhost/beacon/" + tc.image + ":dev"
			var cfg struct {
				User   string
				Labels map[string]string
			}
			if err := json.Unmarshal([]byte(podman("image", "inspect", ref, "--format", "{{json .Config}}")), &cfg); err != nil {
				t.Fatal(err)
			}
			got := want{cfg.User, cfg.Labels["org.opencontainers.image.title"], cfg.Labels["org.opencontainers.image.source"]}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("%s (-want +got):\n%s", ref, d)
			}
			version, revision := cfg.Labels["org.opencontainers.image.version"], cfg.Labels["org.opencontainers.image.revision"]
			if version == "" || len(revision) != 40 {
				t.Errorf("%s: version label %q, revision label %q (want a commit)", ref, version, revision)
			}
			if out := podman("run", "--rm", ref, "--version"); !strings.HasPrefix(out, tc.image+" "+version+" ") {
				t.Errorf("%s --version: %q, want %q first", ref, out, tc.image+" "+version)
			}
		})
	}
}
