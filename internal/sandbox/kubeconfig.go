package sandbox

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// contextName is the kubeconfig context, cluster and user name the sandbox writes.
const contextName = "sluice-sandbox"

// writeKubeconfig writes a self-contained kubeconfig (certificates embedded, so
// it can be copied elsewhere) for id against the API server at server.
func (p *pki) writeKubeconfig(path, server string, id identity) error {
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return fmt.Errorf("reading CA: %w", err)
	}
	cert, err := os.ReadFile(p.path(id.file + ".crt"))
	if err != nil {
		return fmt.Errorf("reading certificate for %s: %w", id.user, err)
	}
	key, err := os.ReadFile(p.path(id.file + ".key"))
	if err != nil {
		return fmt.Errorf("reading key for %s: %w", id.user, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName, Namespace: "default"}
	cfg.CurrentContext = contextName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
