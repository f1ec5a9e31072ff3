package cli

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"
)

// Client-side rate limits of the rest.Config (see the package
// documentation).
const (
	// DefaultQPS turns client-side throttling off: the API server's
	// Priority and Fairness queues requests instead.
	DefaultQPS float32 = QPSOff
	// DefaultBurst is kube-controller-manager's; it applies only when
	// --kube-api-qps is positive.
	DefaultBurst = 30
	// QPSOff is the --kube-api-qps that turns client-side throttling off
	// (client-go builds no rate limiter for a negative QPS).
	QPSOff float32 = -1
)

// Cluster says which API server to talk to and how fast: --kubeconfig,
// --context, --master, --kube-api-qps and --kube-api-burst. The fields hold
// the flag defaults until the flags are parsed.
type Cluster struct {
	// Kubeconfig is an explicit kubeconfig path. "" follows client-go's
	// loading rules: $KUBECONFIG (a list of files, merged), else
	// ~/.kube/config, else the in-cluster configuration.
	Kubeconfig string
	// Context is the kubeconfig context to use; "" means its
	// current-context.
	Context string
	// Master overrides the API server address of the kubeconfig.
	Master string
	// QPS and Burst are copied to the rest.Config. QPS is QPSOff or
	// positive; Burst is positive.
	QPS   float32
	Burst int
}

// newCluster returns kloop's defaults: client-go's loading rules and no
// client-side throttling.
func newCluster() Cluster {
	return Cluster{QPS: DefaultQPS, Burst: DefaultBurst}
}

// addFlags registers the flags on fs, with c's fields as defaults.
func (c *Cluster) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig,
		"path to a kubeconfig; without it $KUBECONFIG, then ~/.kube/config, then the in-cluster configuration is used")
	fs.StringVar(&c.Context, "context", c.Context, "kubeconfig context to use (default: its current-context)")
	fs.StringVar(&c.Master, "master", c.Master, "address of the Kubernetes API server; overrides the kubeconfig's")
	fs.Float32Var(&c.QPS, "kube-api-qps", c.QPS,
		"requests a second to the API server before client-side throttling; -1 turns throttling off and leaves it to the server's API Priority and Fairness")
	fs.IntVar(&c.Burst, "kube-api-burst", c.Burst, "requests above --kube-api-qps allowed in a burst (used when --kube-api-qps is positive)")
}

// validate checks the values without any I/O.
func (c *Cluster) validate() error {
	q := float64(c.QPS)
	if c.QPS != QPSOff && (c.QPS <= 0 || math.IsInf(q, 0) || math.IsNaN(q)) {
		return &FlagError{Flag: "--kube-api-qps", Value: strconv.FormatFloat(q, 'g', -1, 32),
			Want: "want a positive number of requests a second, or -1 for no client-side limit"}
	}
	if c.Burst <= 0 {
		return &FlagError{Flag: "--kube-api-burst", Value: strconv.Itoa(c.Burst), Want: "want a positive number of requests"}
	}
	return nil
}

// restConfig validates c and loads the configuration it names. A missing
// --kubeconfig file or an unknown --context is a *FlagError.
func (c *Cluster) restConfig() (*rest.Config, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.Kubeconfig != "" {
		if _, err := os.Stat(c.Kubeconfig); err != nil {
			return nil, &FlagError{Flag: "--kubeconfig", Value: c.Kubeconfig, Want: fmt.Sprintf("%v; give the path of a kubeconfig file", errors.Unwrap(err))}
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		// client-go reads the home directory once, when it is loaded;
		// read it now, as the rest of the rules are.
		rules.Precedence = []string{filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.Context}
	overrides.ClusterInfo.Server = c.Master
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	if c.Context != "" {
		if raw, err := loader.RawConfig(); err == nil && raw.Contexts[c.Context] == nil {
			return nil, &FlagError{Flag: "--context", Value: c.Context, Want: "no such context in the kubeconfig"}
		}
	}
	cfg, err := loader.ClientConfig()
	switch {
	case err == nil:
	case clientcmd.IsEmptyConfig(err):
		return nil, errors.New("no API server configured: give --kubeconfig or --master, set $KUBECONFIG, write ~/.kube/config, or run in a cluster")
	default:
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg.QPS = c.QPS
	cfg.Burst = c.Burst
	return cfg, nil
}
