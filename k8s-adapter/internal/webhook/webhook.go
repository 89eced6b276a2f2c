// Package webhook is the adapter's validating admission webhook for
// MetalLB's IPAddressPools: `kubectl apply` of a pool with a malformed
// address, a reversed range or one that overlaps another pool is refused
// with the reason, as MetalLB's own webhook refuses it. Field rules that
// need no other object are also checked by a ValidatingAdmissionPolicy
// (deploy/k8s/adapter/validation.yaml); this webhook checks them again (it
// may run without the policy) and checks what needs the other pools.
//
// It serves HTTPS with a certificate from files (a Secret mounted into
// the adapter's Pod). Only cmd/k8s-adapter and tests import this package.
package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Path is where the IPAddressPool webhook is served.
const Path = "/validate-ipaddresspool"

// Pool is an address pool the webhook compares a new one with.
type Pool struct {
	// Name says which pool it is, for the refusal: "IPAddressPool
	// metallb-system/a", "IPAM pool other".
	Name string
	// Ranges are its ranges: CIDRs or "FROM-TO".
	Ranges []string
}

// Pools lists the pools a new IPAddressPool must not overlap: the other
// IPAddressPools, and the IPAM's pools that are not imported from them.
// except names the IPAddressPool being applied (namespace, name), which is
// left out.
type Pools interface {
	OtherPools(ctx context.Context, namespace, name string) ([]Pool, error)
}

// Server serves the webhook.
type Server struct {
	listen   string
	certFile string
	keyFile  string
	pools    Pools
	logger   *slog.Logger
	ln       net.Listener
}

// New returns a Server for listen ("127.0.0.1:9443") with the TLS
// certificate and key in certFile and keyFile.
func New(listen, certFile, keyFile string, pools Pools, logger *slog.Logger) *Server {
	return &Server{listen: listen, certFile: certFile, keyFile: keyFile, pools: pools, logger: logger}
}

// Listen loads the certificate and opens the listener.
func (s *Server) Listen() error {
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return fmt.Errorf("webhook certificate: %w", err)
	}
	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		return fmt.Errorf("webhook listen: %w", err)
	}
	s.ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	return nil
}

// Addr is the listener's address (after Listen).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run serves until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc(Path, s.handle)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("webhook: %w", err)
	}
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update {
		if msg := s.check(r.Context(), req); msg != "" {
			resp.Allowed = false
			resp.Result = &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInvalid, Code: http.StatusUnprocessableEntity, Message: msg}
		}
	}
	out, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// check returns why the IPAddressPool in req is refused, or "".
func (s *Server) check(ctx context.Context, req *admissionv1.AdmissionRequest) string {
	var obj struct {
		Spec struct {
			Addresses []string `json:"addresses"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return "spec.addresses: not a list of strings"
	}
	var problems []string
	var mine []span
	for i, a := range obj.Spec.Addresses {
		sp, err := parseRange(a)
		if err != nil {
			problems = append(problems, fmt.Sprintf("spec.addresses[%d]: %v", i, err))
			continue
		}
		for _, o := range mine {
			if sp.overlaps(o) {
				problems = append(problems, fmt.Sprintf("spec.addresses[%d]: %s overlaps %s of the same pool", i, a, o.text))
			}
		}
		mine = append(mine, sp)
	}
	if len(problems) == 0 && s.pools != nil {
		others, err := s.pools.OtherPools(ctx, req.Namespace, req.Name)
		if err != nil {
			s.logger.WarnContext(ctx, "webhook: cannot list the other pools; overlaps not checked", "error", err)
		}
		for _, p := range others {
			for _, r := range p.Ranges {
				o, err := parseRange(r)
				if err != nil {
					continue
				}
				for _, m := range mine {
					if m.overlaps(o) {
						problems = append(problems, fmt.Sprintf("%s overlaps %s of %s", m.text, r, p.Name))
					}
				}
			}
		}
	}
	if len(problems) == 0 {
		return ""
	}
	return "IPAddressPool " + req.Namespace + "/" + req.Name + " refused: " + strings.Join(problems, "; ")
}

// span is a range of addresses of one family.
type span struct {
	from, to netip.Addr
	text     string
}

func (a span) overlaps(b span) bool {
	return a.from.Is4() == b.from.Is4() && a.from.Compare(b.to) <= 0 && b.from.Compare(a.to) <= 0
}

// parseRange parses a CIDR ("192.0.2.0/28") or a range ("192.0.2.1-192.0.2.9",
// spaces allowed around the dash), as MetalLB takes them.
func parseRange(s string) (span, error) {
	t := strings.TrimSpace(s)
	if from, to, ok := strings.Cut(t, "-"); ok {
		a, err1 := netip.ParseAddr(strings.TrimSpace(from))
		b, err2 := netip.ParseAddr(strings.TrimSpace(to))
		switch {
		case err1 != nil || err2 != nil || a.Zone() != "" || b.Zone() != "":
			return span{}, fmt.Errorf("%q is not a range of two IP addresses", s)
		case a.Unmap().Is4() != b.Unmap().Is4():
			return span{}, fmt.Errorf("range %q mixes IPv4 and IPv6", s)
		case b.Unmap().Less(a.Unmap()):
			return span{}, fmt.Errorf("range %q is reversed: %s comes after %s", s, a, b)
		}
		return span{from: a.Unmap(), to: b.Unmap(), text: t}, nil
	}
	p, err := netip.ParsePrefix(t)
	if err != nil {
		return span{}, fmt.Errorf("%q is not a CIDR (such as 192.0.2.0/28) or a range (192.0.2.1-192.0.2.9)", s)
	}
	p = p.Masked()
	return span{from: p.Addr(), to: last(p), text: t}, nil
}

// last returns the last address of p.
func last(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
