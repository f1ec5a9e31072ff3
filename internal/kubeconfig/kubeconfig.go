// Package kubeconfig writes the kubeconfig files kloop's own tools and
// tests hand to other processes: a test environment's Env writes its
// KubeconfigPath with it, and tests and benchmarks write one per cluster
// of a fleet.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Write writes cfg (host, CA and client certificate) as a kubeconfig file
// with one context named "kloop".
func Write(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kloop"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["kloop"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["kloop"] = &clientcmdapi.Context{Cluster: "kloop", AuthInfo: "kloop", Namespace: "default"}
	kc.CurrentContext = "kloop"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
