package kube_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
	"github.com/beaconlb/beacon/k8s-adapter/internal/testenv"
	"github.com/beaconlb/beacon/k8s-adapter/internal/webhook"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// TestApplyTimeValidation applies the shipped ValidatingAdmissionPolicy and
// registers the adapter's webhook (served on loopback) with the real API
// server: `kubectl apply` of a bad CIDR, a reversed IPv4 or IPv6 range and
// an overlapping pool is refused with the reason. Deleting a pool in use
// takes its Services' addresses, as in MetalLB: the Service is told why,
// and the IPAM pool and allocation are gone too.
func TestApplyTimeValidation(t *testing.T) {
	installCRDs(t)
	ctx := context.Background()
	e := newEnv(t, nil)
	mns := e.ns + "-metallb"
	if _, err := k8s.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(root, "deploy", "k8s", "adapter", "validation.yaml")
	if _, err := cluster.Kubectl(ctx, "", "apply", "-f", policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cluster.Kubectl(context.Background(), "", "delete", "-f", policy) })

	a := e.start(func(c *kube.Config) { c.MetalLBNamespace = mns })
	certFile, keyFile, caPEM := selfSigned(t)
	wh := webhook.New("127.0.0.1:0", certFile, keyFile, a.c, testLogger(t))
	if err := wh.Listen(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- wh.Run(wctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook: %v", err)
		}
	})
	url := fmt.Sprintf("https://%s%s", wh.Addr(), webhook.Path)
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	cfgName := "beacon-test-" + e.ns
	_, err = k8s.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: cfgName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "ipaddresspools.beacon.io",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": mns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"metallb.io"}, APIVersions: []string{"*"}, Resources: []string{"ipaddresspools"}},
			}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfgName, metav1.DeleteOptions{})
	})

	apply := func(name string, addrs ...string) error {
		_, err := cluster.Kubectl(ctx, fmt.Sprintf("{apiVersion: metallb.io/v1beta1, kind: IPAddressPool, metadata: {name: %s, namespace: %s}, spec: {addresses: [%s]}}",
			name, mns, strings.Join(addrs, ", ")), "apply", "-f", "-")
		return err
	}
	refused := func(what string, want []string, name string, addrs ...string) {
		t.Helper()
		// The API server picks up policies and webhooks in the background.
		waitFor(t, what+" to be refused", func() (bool, string) {
			err := apply(name, addrs...)
			if err == nil {
				_, _ = cluster.Kubectl(ctx, "", "-n", mns, "delete", "ipaddresspool", name)
				return false, "accepted"
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					return false, err.Error()
				}
			}
			return true, ""
		})
	}
	v6 := fmt.Sprintf("2001:db8:%x:ff::", e.n)
	// The policy (evaluated before webhooks) refuses field errors; the
	// webhook what CEL cannot check.
	refused("a bad CIDR", []string{"beacon-ipaddresspool-fields", "192.0.2.300/28", "not a CIDR"}, "bad-cidr", "192.0.2.300/28")
	refused("a reversed IPv4 range", []string{"beacon-ipaddresspool-fields", "reversed"}, "reversed-v4", "198.51.100.9-198.51.100.1")
	refused("a reversed IPv6 range", []string{"ipaddresspools.beacon.io", "reversed", v6 + "10"}, "reversed-v6", v6+"10-"+v6+"1")

	// A pool in use, then one overlapping it.
	t.Cleanup(func() {
		_, _ = ipam.Pools.DeletePool(context.Background(), &ipamv1.DeletePoolRequest{Name: "pools/" + e.tenant + "-first", Force: true})
	})
	if err := apply("first", e.v4(0)); err != nil {
		t.Fatal(err)
	}
	e.create(e.svc("web", func(s *corev1.Service) { s.Annotations = map[string]string{"metallb.io/address-pool": "first"} }))
	ip := e.waitIPs("web", 1)[0]
	lo, _, _ := strings.Cut(e.v4(0), "/")
	refused("an overlapping pool", []string{"overlaps", "IPAddressPool " + mns + "/first"}, "second", lo+"-"+ip)

	// Deleting it takes web's address, as in MetalLB.
	if _, err := cluster.Kubectl(ctx, "", "-n", mns, "delete", "ipaddresspool", "first"); err != nil {
		t.Fatal(err)
	}
	msg := e.waitEvent("web", reason.PoolDeleted)
	if !strings.Contains(msg, ip) || !strings.Contains(msg, "first") {
		t.Errorf("PoolDeleted event %q does not name %s and the pool", msg, ip)
	}
	waitFor(t, "web to lose its address, and the IPAM to agree", func() (bool, string) {
		s, err := e.get("web")
		if err != nil {
			return false, err.Error()
		}
		_, perr := ipam.Pools.GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/" + e.tenant + "-first"})
		alloc := e.allocation(e.ns + "/web")
		return len(ingress(s)) == 0 && perr != nil && alloc == nil, fmt.Sprint(ingress(s), perr, alloc)
	})
	e.waitEvent("web", reason.AllocationFailed)
}

// selfSigned writes a certificate for 127.0.0.1, its own CA, and its key,
// and returns their files and the certificate's PEM.
func selfSigned(t *testing.T) (certFile, keyFile string, certPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "beacon-test-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := errors.Join(os.WriteFile(certFile, certPEM, 0o600), os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, certPEM
}
