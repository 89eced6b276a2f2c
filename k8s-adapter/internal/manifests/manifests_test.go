package manifests

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/k8s-adapter/internal/testenv"
)

// object is the part of a Kubernetes object the checks read.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Replicas *int `json:"replicas"`
		Template struct {
			Spec podSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

type podSpec struct {
	AutomountServiceAccountToken *bool       `json:"automountServiceAccountToken"`
	ServiceAccountName           string      `json:"serviceAccountName"`
	Containers                   []container `json:"containers"`
	Volumes                      []struct {
		Name   string `json:"name"`
		Secret *struct {
			SecretName string `json:"secretName"`
		} `json:"secret"`
	} `json:"volumes"`
}

type container struct {
	Name           string          `json:"name"`
	Args           []string        `json:"args"`
	LivenessProbe  json.RawMessage `json:"livenessProbe"`
	ReadinessProbe json.RawMessage `json:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `json:"requests"`
	} `json:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
		Capabilities             struct {
			Add  []string `json:"add"`
			Drop []string `json:"drop"`
		} `json:"capabilities"`
	} `json:"securityContext"`
}

// workloads are the kinds that run pods.
var workloads = []string{"Deployment", "DaemonSet", "StatefulSet"}

func TestOverlaysApply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster, err := testenv.StartCluster(ctx)
	if errors.Is(err, testenv.ErrNoTestbins) && os.Getenv("BEACON_TESTBINS_REQUIRED") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	beaconctl := beaconctlBinary(t)
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		out, err := cluster.Kubectl(ctx, stdin, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// The namespaces the dry run's namespaced objects need (a dry run does
	// not create the namespace it would create) and MetalLB's, which the
	// adapter's Role lives in, and the CRDs.
	kubectl("", "create", "namespace", "beacon-system")
	kubectl("", "create", "namespace", "metallb-system")
	kubectl("", "apply", "--server-side", "-k", filepath.Join(root, "deploy", "k8s", "crds"))

	// The credentials, made as the docs say: no Secret by hand.
	certs, err := exec.CommandContext(ctx, beaconctl, "certs", "deploy", "--dir", filepath.Join(t.TempDir(), "ca"), "--tenant", "c1").Output()
	if err != nil {
		t.Fatalf("beaconctl certs deploy: %v", err)
	}
	var made struct{ Items []object }
	if err := json.Unmarshal([]byte(kubectl(string(certs), "apply", "--server-side", "-f", "-", "-o", "json")), &made); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]bool{}
	for _, s := range made.Items {
		secrets[s.Metadata.Name] = true
	}

	tests := []struct {
		overlay string
		// Replicas of each Deployment and StatefulSet.
		replicas map[string]int
		budgets  []string
	}{
		{overlay: "dev",
			replicas: map[string]int{"Deployment/beacon-ipamd": 1, "Deployment/beacon-gateway": 1, "Deployment/beacon-k8s-adapter": 1}},
		{overlay: "external-etcd",
			replicas: map[string]int{"Deployment/beacon-ipamd": 3, "Deployment/beacon-gateway": 2, "Deployment/beacon-k8s-adapter": 2},
			budgets:  []string{"beacon-gateway", "beacon-ipamd"}},
		{overlay: "with-etcd",
			replicas: map[string]int{"Deployment/beacon-ipamd": 3, "Deployment/beacon-gateway": 2, "Deployment/beacon-k8s-adapter": 2, "StatefulSet/beacon-etcd": 3},
			budgets:  []string{"beacon-etcd", "beacon-gateway", "beacon-ipamd"}},
	}
	for _, tc := range tests {
		t.Run(tc.overlay, func(t *testing.T) {
			rendered := kubectl("", "kustomize", filepath.Join(root, "deploy", "k8s", "overlays", tc.overlay))
			if strings.Contains(rendered, "CHANGE-ME") {
				t.Error("a CHANGE-ME is left")
			}
			// What the API server makes of it: validated, defaulted,
			// admitted, not stored.
			var applied struct{ Items []object }
			if err := json.Unmarshal([]byte(kubectl(rendered, "apply", "--server-side", "--dry-run=server", "-f", "-", "-o", "json")), &applied); err != nil {
				t.Fatal(err)
			}
			replicas := map[string]int{}
			var budgets []string
			for _, o := range applied.Items {
				id := o.Kind + "/" + o.Metadata.Name
				switch o.Kind {
				case "PodDisruptionBudget":
					budgets = append(budgets, o.Metadata.Name)
				case "Secret":
					t.Errorf("%s: the overlay carries a Secret; credentials come from beaconctl certs deploy", id)
				}
				if !slices.Contains(workloads, o.Kind) {
					continue
				}
				if o.Spec.Replicas != nil {
					replicas[id] = *o.Spec.Replicas
				}
				checkPod(t, id, o.Spec.Template.Spec, secrets)
			}
			sort.Strings(budgets)
			if d := cmp.Diff(tc.replicas, replicas); d != "" {
				t.Errorf("replicas (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.budgets, budgets); d != "" {
				t.Errorf("PodDisruptionBudgets (-want +got):\n%s", d)
			}
		})
	}
}

// checkPod checks what every Beacon pod promises: probes, requests, no
// privilege escalation, every capability dropped but the announcer's two,
// no API token where the component calls no API, and every Secret it mounts
// made by beaconctl certs deploy.
func checkPod(t *testing.T, id string, spec podSpec, secrets map[string]bool) {
	t.Helper()
	apiCallers := map[string]bool{"Deployment/beacon-k8s-adapter": true, "DaemonSet/beacon-announcer": true}
	if !apiCallers[id] && (spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken) {
		t.Errorf("%s: mounts a ServiceAccount token but calls no Kubernetes API", id)
	}
	for _, c := range spec.Containers {
		if len(c.LivenessProbe) == 0 || len(c.ReadinessProbe) == 0 {
			t.Errorf("%s/%s: no liveness or readiness probe", id, c.Name)
		}
		if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
			t.Errorf("%s/%s: no CPU or memory request", id, c.Name)
		}
		if p := c.SecurityContext.AllowPrivilegeEscalation; p == nil || *p {
			t.Errorf("%s/%s: privilege escalation not off", id, c.Name)
		}
		wantAdd := []string(nil)
		if id == "DaemonSet/beacon-announcer" {
			wantAdd = []string{"NET_ADMIN", "NET_RAW"}
		}
		if !slices.Equal(c.SecurityContext.Capabilities.Drop, []string{"ALL"}) || !slices.Equal(c.SecurityContext.Capabilities.Add, wantAdd) {
			t.Errorf("%s/%s: capabilities drop %v add %v, want drop [ALL] add %v", id, c.Name,
				c.SecurityContext.Capabilities.Drop, c.SecurityContext.Capabilities.Add, wantAdd)
		}
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil && !secrets[v.Secret.SecretName] {
			t.Errorf("%s: mounts Secret %s, which beaconctl certs deploy does not make", id, v.Secret.SecretName)
		}
	}
}

// beaconctlBinary returns $BEACON_BIN/beaconctl (make test-k8s builds it),
// else builds it into the test's folder.
func beaconctlBinary(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("BEACON_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "beaconctl")); err == nil {
			return filepath.Join(d, "beaconctl")
		}
	}
	bin := filepath.Join(t.TempDir(), "beaconctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/beaconlb/beacon/beaconctl").CombinedOutput(); err != nil {
		t.Fatalf("building beaconctl: %v\n%s", err, out)
	}
	return bin
}
