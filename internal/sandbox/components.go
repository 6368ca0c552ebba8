package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Launch starts the program at path as one more component of the sandbox,
// logging to Dir()/logs/<name>.log. Stop stops it first (newest first) and Err
// reports it if it exits. Cluster API's controllers run this way (package
// internal/sandbox/capi).
func (s *Sandbox) Launch(name, path string, args []string) error {
	return s.launch(name, filepath.Dir(path), args, filepath.Base(path))
}

// CAFile is the path of the sandbox CA's certificate, which every component's
// serving certificate chains to.
func (s *Sandbox) CAFile() string { return filepath.Join(s.dir, "pki", "ca.crt") }

// ServingCert is the certificate and key the sandbox's components serve with,
// signed by its CA for 127.0.0.1 and localhost; a webhook server on loopback
// can present it too.
func (s *Sandbox) ServingCert() (certFile, keyFile string) {
	return filepath.Join(s.dir, "pki", "serving.crt"), filepath.Join(s.dir, "pki", "serving.key")
}

// WaitHealthy polls url (https, trusting only the sandbox CA) until it answers
// 200, a component exits, or ctx ends; the error names the component's log.
func (s *Sandbox) WaitHealthy(ctx context.Context, name, url string) error {
	caPEM, err := os.ReadFile(s.CAFile())
	if err != nil {
		return fmt.Errorf("reading the sandbox CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("parsing the sandbox CA certificate")
	}
	return s.waitHealthy(ctx, name, url, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
}
