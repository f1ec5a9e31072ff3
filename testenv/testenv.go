package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/internal/cpbin"
	"github.com/kloop-dev/kloop/internal/kubeconfig"
)

// BinDirEnv names the environment variable that overrides where the
// control-plane binaries are looked up (default: the per-user directory
// that `kloop controlplane install` fills; see Options.BinDir).
const BinDirEnv = cpbin.Env

// DefaultFeatureGates are the kube-apiserver feature gates Start sets
// unless Options.FeatureGates says otherwise: ShardedListAndWatch (KEP-5866,
// alpha and off by default in Kubernetes), so that shard selectors on LIST
// and WATCH are applied by the server.
var DefaultFeatureGates = map[string]bool{"ShardedListAndWatch": true}

// featureGatesFlag is the --feature-gates value for gates: defaults
// overridden by opts, sorted by name.
func featureGatesFlag(gates map[string]bool) string {
	merged := maps.Clone(DefaultFeatureGates)
	maps.Copy(merged, gates)
	parts := make([]string, 0, len(merged))
	for _, name := range slices.Sorted(maps.Keys(merged)) {
		parts = append(parts, name+"="+strconv.FormatBool(merged[name]))
	}
	return "--feature-gates=" + strings.Join(parts, ",")
}

// DefaultControllers are the kube-controller-manager controllers Start
// runs with Options.ControllerManager: Deployments get ReplicaSets and Pods,
// owned objects are garbage-collected, namespaces are finalized and get
// their service account. Options.Controllers adds to them.
var DefaultControllers = []string{
	"deployment-controller", "replicaset-controller", "garbage-collector-controller",
	"namespace-controller", "serviceaccount-controller", "serviceaccount-token-controller",
}

// controllersFlag is kube-controller-manager's --controllers value for
// extra: its entries first, then DefaultControllers. The controller
// manager takes the first entry that names a controller, so "-name" in
// extra turns a default one off.
func controllersFlag(extra []string) string {
	return "--controllers=" + strings.Join(slices.Concat(extra, DefaultControllers), ",")
}

// Options configure Start. The zero value starts etcd and kube-apiserver on
// free loopback ports in a temporary directory that Stop removes.
type Options struct {
	// ControllerManager also starts kube-controller-manager with
	// DefaultControllers (so Deployments get Pods, owned objects are
	// collected and namespaces are finalized) and Controllers. Default false.
	ControllerManager bool

	// Controllers are more kube-controller-manager controllers to run, by
	// the names of its --controllers flag (job-controller,
	// cronjob-controller, ...), in addition to DefaultControllers; "-name"
	// turns a default one off and "*" turns on all that are on by default
	// in Kubernetes. Only with ControllerManager. An unknown name makes
	// kube-controller-manager exit at start (see its log in Dir/logs).
	Controllers []string

	// DataDir keeps etcd data and certificates across runs. Empty means a new
	// temporary directory, removed by Stop. A given DataDir is never removed.
	DataDir string

	// BinDir holds etcd, kube-apiserver and kube-controller-manager. Empty
	// means $KLOOP_CONTROLPLANE_BIN, else the per-user directory
	// os.UserCacheDir()/kloop/controlplane/KubernetesVersion (where
	// `kloop controlplane install` puts them and `kloop controlplane dir`
	// prints) when it holds etcd, else bin/ at the root of a kloop checkout
	// above the working directory when that does, else the per-user
	// directory, whose missing binaries Start reports with the command that
	// installs them.
	BinDir string

	// APIServerPort and EtcdPort pin ports on 127.0.0.1; 0 picks free ones.
	APIServerPort, EtcdPort int

	// ReadyTimeout bounds how long Start waits for /readyz. Default 60s.
	ReadyTimeout time.Duration

	// APIServerFlags are extra kube-apiserver flags (--name=value), appended last.
	APIServerFlags []string

	// ControllerManagerFlags are extra kube-controller-manager flags
	// (--name=value), appended last, for example --kube-api-qps=500,
	// --kube-api-burst=1000 and --concurrent-deployment-syncs=20 so that a
	// benchmark's ReplicaSets and Pods are not made at the controller
	// manager's default client rate (20 QPS, burst 30) and 5 workers.
	// Only with ControllerManager.
	ControllerManagerFlags []string

	// FeatureGates are kube-apiserver feature gates to set, on top of
	// DefaultFeatureGates: an entry overrides the default of the same name,
	// so {"ShardedListAndWatch": false} keeps sharded list and watch off.
	FeatureGates map[string]bool

	// Logger receives progress lines (start times, restarts). Default: discard.
	Logger *slog.Logger
}

// Env is a running local control plane. Its methods are safe for concurrent
// use; the fault hooks (StopAPIServer, StartAPIServer, RestartEtcd,
// CompactAndRestart) are serialized. Faults on the network path between a client
// and the API server come from a Proxy (see APIServerProxy).
type Env struct {
	// Config is an admin (system:masters) client config for the API server.
	// Treat it as read-only; rest.CopyConfig it before changing it.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file for the same admin user.
	KubeconfigPath string
	// APIServerURL is https://127.0.0.1:<port>; EtcdURL is http://127.0.0.1:<port>.
	APIServerURL, EtcdURL string
	// APIServerPort and EtcdPort are the ports in use.
	APIServerPort, EtcdPort int
	// Dir is the directory holding data, certificates and logs.
	Dir string
	// StartupDuration is how long Start took until /readyz answered ok.
	StartupDuration time.Duration

	opts    Options
	tempDir bool
	pki     *pki
	log     *slog.Logger

	mu        sync.Mutex
	etcd      *process
	apiserver *process
	kcm       *process
	stopped   bool
}

// Start launches etcd and kube-apiserver (and kube-controller-manager when
// asked), waits until the API server reports ready and returns the Env. On any
// error every process it started is stopped again. In a test binary run with
// -short it starts nothing and returns ErrShort. The children die with the
// calling process even if it is killed (they get SIGKILL on parent death).
func Start(ctx context.Context, opts Options) (*Env, error) {
	// Ports are picked free and then handed to the processes, so another
	// process on the machine can take one in between. With ports of its
	// own choosing and a temporary directory, Start tries again.
	retry := opts.APIServerPort == 0 && opts.EtcdPort == 0 && opts.DataDir == ""
	for attempt := 1; ; attempt++ {
		e, err := start(ctx, opts)
		if err == nil || !retry || attempt == 3 || !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			return e, err
		}
		if opts.Logger != nil {
			opts.Logger.Info("a port was taken before the control plane bound it; starting again on others", "attempt", attempt, "err", err)
		}
	}
}

func start(ctx context.Context, opts Options) (_ *Env, err error) {
	began := time.Now()
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = cpbin.Dir(); err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
	}
	bins := map[string]string{}
	names := []string{"etcd", "kube-apiserver"}
	if opts.ControllerManager {
		names = append(names, "kube-controller-manager")
	}
	for _, n := range names {
		if bins[n], err = findBinary(binDir, n); err != nil {
			return nil, err
		}
	}
	if underShort() {
		return nil, ErrShort
	}

	e := &Env{opts: opts, log: logger}
	if opts.DataDir != "" {
		e.Dir = opts.DataDir
		if err := os.MkdirAll(e.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("testenv: create data dir: %w", err)
		}
	} else {
		if e.Dir, err = os.MkdirTemp("", "kloop-testenv-"); err != nil {
			return nil, fmt.Errorf("testenv: create temp dir: %w", err)
		}
		e.tempDir = true
	}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	for _, d := range []string{"logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(e.Dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
	}
	if e.pki, err = loadOrCreatePKI(filepath.Join(e.Dir, "pki")); err != nil {
		return nil, err
	}

	if e.EtcdPort, err = pickPort(opts.EtcdPort); err != nil {
		return nil, err
	}
	peerPort, err := pickPort(0)
	if err != nil {
		return nil, err
	}
	if e.APIServerPort, err = pickPort(opts.APIServerPort); err != nil {
		return nil, err
	}
	e.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(e.EtcdPort)
	e.APIServerURL = "https://127.0.0.1:" + strconv.Itoa(e.APIServerPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)

	e.etcd = &process{
		name: "etcd", bin: bins["etcd"], logPath: filepath.Join(e.Dir, "logs", "etcd.log"),
		args: []string{
			"--data-dir", filepath.Join(e.Dir, "etcd"),
			"--listen-client-urls", e.EtcdURL, "--advertise-client-urls", e.EtcdURL,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "default=" + peerURL,
			"--unsafe-no-fsync", // test data: durability across power loss is not wanted, speed is
		},
	}
	if err := e.etcd.start(); err != nil {
		return nil, err
	}
	logger.Info("etcd started", "pid", e.etcd.pid(), "url", e.EtcdURL)
	if err := waitHTTP(ctx, e.etcd, http.DefaultClient, e.EtcdURL+"/health", opts.ReadyTimeout); err != nil {
		return nil, err
	}

	adminCfg, err := e.UserConfig("kloop-admin", "system:masters")
	if err != nil {
		return nil, err
	}
	e.Config = adminCfg
	e.KubeconfigPath = filepath.Join(e.Dir, "kubeconfig")
	if err := kubeconfig.Write(e.KubeconfigPath, adminCfg); err != nil {
		return nil, err
	}

	e.apiserver = e.newAPIServer(bins["kube-apiserver"])
	if err := e.startAPIServerLocked(ctx); err != nil {
		return nil, err
	}

	if opts.ControllerManager {
		p := e.pki
		e.kcm = &process{
			name: "kube-controller-manager", bin: bins["kube-controller-manager"],
			logPath: filepath.Join(e.Dir, "logs", "kube-controller-manager.log"),
			args: []string{
				"--kubeconfig", e.KubeconfigPath,
				controllersFlag(opts.Controllers),
				"--service-account-private-key-file", p.path("sa.key"),
				"--root-ca-file", p.path("ca.crt"),
				"--leader-elect=false",
				"--secure-port=0",
			},
		}
		e.kcm.args = append(e.kcm.args, opts.ControllerManagerFlags...)
		if err := e.kcm.start(); err != nil {
			return nil, err
		}
		logger.Info("kube-controller-manager started", "pid", e.kcm.pid())
	}
	e.StartupDuration = time.Since(began)
	logger.Info("control plane ready", "apiserver", e.APIServerURL, "took", e.StartupDuration.Round(time.Millisecond))
	return e, nil
}

func (e *Env) newAPIServer(bin string) *process {
	p := e.pki
	args := []string{
		"--etcd-servers", e.EtcdURL,
		"--secure-port", strconv.Itoa(e.APIServerPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--cert-dir", filepath.Join(e.Dir, "pki"),
		"--tls-cert-file", p.path("apiserver.crt"),
		"--tls-private-key-file", p.path("apiserver.key"),
		"--client-ca-file", p.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file", p.path("sa.key"),
		"--service-account-signing-key-file", p.path("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		featureGatesFlag(e.opts.FeatureGates),
	}
	args = append(args, e.opts.APIServerFlags...)
	return &process{name: "kube-apiserver", bin: bin, args: args, logPath: filepath.Join(e.Dir, "logs", "kube-apiserver.log")}
}

func (e *Env) startAPIServerLocked(ctx context.Context) error {
	if e.apiserver.running() {
		return nil
	}
	began := time.Now()
	if err := e.apiserver.start(); err != nil {
		return err
	}
	e.log.Info("kube-apiserver started", "pid", e.apiserver.pid(), "url", e.APIServerURL)
	client, err := e.httpClient()
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, e.apiserver, client, e.APIServerURL+"/readyz", e.opts.ReadyTimeout); err != nil {
		return err
	}
	e.log.Info("kube-apiserver ready", "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// httpClient is an admin HTTPS client for readiness probes.
func (e *Env) httpClient() (*http.Client, error) {
	cert, err := tls.X509KeyPair(e.Config.CertData, e.Config.KeyData)
	if err != nil {
		return nil, fmt.Errorf("testenv: admin key pair: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.pki.caPEM)
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}},
	}, nil
}

// waitHTTP polls url until it answers 200, p exits (an error with its log
// tail), ctx ends or timeout passes.
func waitHTTP(ctx context.Context, p *process, client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		select {
		case <-p.exited:
			return p.exitError()
		case <-ctx.Done():
			return fmt.Errorf("testenv: %s not ready at %s after %v (last answer: %s); last log lines of %s:\n%s",
				p.name, url, timeout, last, p.logPath, tail(p.logPath, 20))
		case <-tick.C:
		}
	}
}

// pickPort returns want if it is free on 127.0.0.1 (an error naming it if
// not), or a free port when want is 0.
func pickPort(want int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(want)))
	if err != nil {
		return 0, fmt.Errorf("testenv: port %d on 127.0.0.1 is not free (pick another, or 0 for any): %w", want, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// apiserverGrace is how long kube-apiserver gets after SIGTERM before SIGKILL.
const apiserverGrace = 2 * time.Second

// Stop ends every child process and, when Start created the directory,
// removes it. It is idempotent and safe to call on a partly started Env.
func (e *Env) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.stopped = true
	// Dependents first: KCM, then the API server, then etcd.
	for _, p := range []*process{e.kcm, e.apiserver, e.etcd} {
		if p != nil {
			grace := 10 * time.Second
			if p == e.apiserver {
				grace = apiserverGrace
			}
			p.stop(grace)
		}
	}
	if e.tempDir {
		_ = os.RemoveAll(e.Dir)
	}
	e.log.Info("control plane stopped")
}

// PIDs returns the process ids of the children started so far (the current
// API server after a restart), keyed by name.
func (e *Env) PIDs() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[string]int{}
	for _, p := range []*process{e.etcd, e.apiserver, e.kcm} {
		if p != nil && p.pid() != 0 {
			m[p.name] = p.pid()
		}
	}
	return m
}

// StopAPIServer stops kube-apiserver, leaving etcd (and KCM) running.
func (e *Env) StopAPIServer() {
	e.mu.Lock()
	defer e.mu.Unlock()
	// kube-apiserver drains open watches for a long time on SIGTERM; a test
	// restart wants the connections cut, as a crash or a fast rollout does.
	e.apiserver.stop(apiserverGrace)
	e.log.Info("kube-apiserver stopped")
}

// StartAPIServer starts kube-apiserver again on the same address, with the
// same certificates and etcd, and waits until it is ready.
func (e *Env) StartAPIServer(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("testenv: env is stopped")
	}
	return e.startAPIServerLocked(ctx)
}

// restartAPIServer stops kube-apiserver and starts it again; watches open
// across it end, data in etcd stays. (StopAPIServer then StartAPIServer.)
func (e *Env) restartAPIServer(ctx context.Context) error {
	e.StopAPIServer()
	return e.StartAPIServer(ctx)
}

// RestartEtcd stops etcd (SIGTERM, as a rolling restart of an etcd member
// does; SIGKILL after 10s) and starts it again on the same address with the
// same data, waiting until it reports healthy. The API server stays up: its
// requests and watches fail until etcd is back, then it reconnects by
// itself.
func (e *Env) RestartEtcd(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("testenv: env is stopped")
	}
	e.etcd.stop(10 * time.Second)
	e.log.Info("etcd stopped")
	if err := e.etcd.start(); err != nil {
		return err
	}
	e.log.Info("etcd started", "pid", e.etcd.pid(), "url", e.EtcdURL)
	return waitHTTP(ctx, e.etcd, http.DefaultClient, e.EtcdURL+"/health", e.opts.ReadyTimeout)
}

// compact compacts etcd to its current revision, so that resourceVersions
// older than now are gone from storage, and returns that revision.
//
// The API server's watch cache still holds the recent history it has
// buffered and keeps serving watches from it; it answers 410 Gone only for a
// resourceVersion older than its own window. Restart the API server after
// compact (or call CompactAndRestart) to make every older resourceVersion
// Gone, as happens on a real cluster whose cache window has moved on.
func (e *Env) compact(ctx context.Context) (int64, error) {
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// Any key will do: every response carries the store's current revision.
	if err := e.etcdCall(ctx, "/v3/kv/range", map[string]any{"key": "AA=="}, &rng); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("testenv: etcd revision %q: %w", rng.Header.Revision, err)
	}
	if err := e.etcdCall(ctx, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil); err != nil {
		return 0, err
	}
	e.log.Info("etcd compacted", "revision", rev)
	return rev, nil
}

// CompactAndRestart compacts etcd and restarts the API server, so that a
// watch or list from any resourceVersion older than now gets 410 Gone.
func (e *Env) CompactAndRestart(ctx context.Context) (int64, error) {
	rev, err := e.compact(ctx)
	if err != nil {
		return 0, err
	}
	return rev, e.restartAPIServer(ctx)
}

// EtcdPut writes value under key straight into etcd, past the API server.
// It is for tests of what happens to data the API server cannot decode:
// objects live under /registry/<resource>/<namespace>/<name>, and anything
// but the API server's own encoding there makes the object corrupt
// (KEP-3926), so that reading it fails until it is deleted with
// ignoreStoreReadErrorWithClusterBreakingPotential.
func (e *Env) EtcdPut(ctx context.Context, key string, value []byte) error {
	return e.etcdCall(ctx, "/v3/kv/put", map[string]any{"key": []byte(key), "value": value}, nil)
}

// etcdCall posts a JSON request to etcd's HTTP gateway.
func (e *Env) etcdCall(ctx context.Context, path string, body any, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.EtcdURL+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("testenv: etcd %s: %w", path, err)
	}
	defer resp.Body.Close()
	respBody, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("testenv: etcd %s: %s: %s", path, resp.Status, bytes.TrimSpace(respBody))
	}
	if out != nil {
		if err := json.Unmarshal(respBody, out); err != nil {
			return fmt.Errorf("testenv: etcd %s: decode: %w", path, err)
		}
	}
	return nil
}

// UserConfig returns a client config that authenticates as user with the
// given groups, through a client certificate signed by the cluster CA. Such a
// user has no permissions until RBAC grants them (system:masters has all).
func (e *Env) UserConfig(user string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := e.pki.issue(user, groups, false)
	if err != nil {
		return nil, fmt.Errorf("testenv: client certificate for %q: %w", user, err)
	}
	return &rest.Config{
		Host: e.APIServerURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   e.pki.caPEM,
			CertData: certPEM,
			KeyData:  keyPEM,
		},
		QPS:   200,
		Burst: 400,
	}, nil
}

// logTails returns the last n lines of each process log, for failure reports.
func (e *Env) logTails(n int) string {
	var b bytes.Buffer
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		p := filepath.Join(e.Dir, "logs", name+".log")
		if _, err := os.Stat(p); err != nil {
			continue
		}
		fmt.Fprintf(&b, "---- %s (last %d lines of %s)\n%s\n", name, n, p, tail(p, n))
	}
	return b.String()
}
