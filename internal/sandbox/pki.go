package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the sandbox's certificate authority and the files it issued. Keys are
// ECDSA P-256: quick to generate, accepted by every component.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// identity is one client certificate: who a component is to the API server.
type identity struct {
	file   string // base name of the .crt/.key pair
	user   string // certificate CommonName, the Kubernetes user name
	groups []string
}

// The sandbox's identities. The controller manager and scheduler get the user
// names Kubernetes' bootstrap RBAC grants; kwok plays every kubelet, so it is an
// administrator, as is the person or test holding the admin kubeconfig.
var (
	adminIdentity     = identity{file: "admin", user: "sluice-sandbox-admin", groups: []string{"system:masters"}}
	controllerManager = identity{file: "kube-controller-manager", user: "system:kube-controller-manager"}
	schedulerIdentity = identity{file: "kube-scheduler", user: "system:kube-scheduler"}
	kwokIdentity      = identity{file: "kwok", user: "kwok", groups: []string{"system:masters"}}
	etcdClient        = identity{file: "etcd-client", user: "kube-apiserver-etcd-client"}
)

func newPKI(dir string, now time.Time) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating pki directory: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "sluice-sandbox-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	p := &pki{dir: dir, caCert: cert, caKey: key}
	if err := p.write("ca", der, key); err != nil {
		return nil, err
	}
	return p, nil
}

// issueServing issues the one serving certificate every component presents:
// valid for loopback and for the in-cluster names of the kubernetes Service.
func (p *pki) issueServing(now time.Time, serviceIP net.IP) error {
	tmpl := p.leaf(now, "sluice-sandbox-serving", nil)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.DNSNames = []string{
		"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local",
	}
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), serviceIP}
	return p.issue("serving", tmpl)
}

// issueClient issues a client certificate for id.
func (p *pki) issueClient(now time.Time, id identity) error {
	tmpl := p.leaf(now, id.user, id.groups)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return p.issue(id.file, tmpl)
}

// writeServiceAccountKey writes the key pair the API server signs
// service-account tokens with and verifies them against.
func (p *pki) writeServiceAccountKey() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating service-account key: %w", err)
	}
	if err := writeKey(p.path("sa.key"), key); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encoding service-account public key: %w", err)
	}
	return writePEM(p.path("sa.pub"), "PUBLIC KEY", pub, 0o644)
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p *pki) leaf(now time.Time, cn string, orgs []string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
}

func (p *pki) issue(name string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating key for %s: %w", name, err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("signing certificate for %s: %w", name, err)
	}
	return p.write(name, der, key)
}

func (p *pki) write(name string, der []byte, key *ecdsa.PrivateKey) error {
	if err := writePEM(p.path(name+".crt"), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writeKey(p.path(name+".key"), key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding key %s: %w", path, err)
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial is still a valid certificate.
		return big.NewInt(1)
	}
	return n
}
