package localcluster

import (
	"fmt"

	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig that kubectl can use: the loopback serving
// certificate is self-signed for the name apiserver-loopback-client, so the file
// carries the CA data and that server name along with the bearer token.
func writeKubeconfig(path string, config *restclient.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["localcluster"] = &clientcmdapi.Cluster{
		Server:                   config.Host,
		CertificateAuthorityData: config.CAData,
		TLSServerName:            config.ServerName,
	}
	kc.AuthInfos["localcluster"] = &clientcmdapi.AuthInfo{Token: config.BearerToken}
	kc.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: "localcluster", Namespace: "default"}
	kc.CurrentContext = "localcluster"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
