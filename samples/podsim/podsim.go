package podsim

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/manager"
)

// Defaults of Options.
const (
	DefaultNodeName = "kloop-node"
	DefaultWorkers  = 4
	// SchedulerName is the scheduler whose pods podsim binds.
	SchedulerName = corev1.DefaultSchedulerName
	// NodeIP is the Node's InternalIP and every pod's hostIP.
	NodeIP = "127.0.0.1"
	// PodCIDR is where pod IPs come from.
	PodCIDR = "10.244.0.0/16"
	// DefaultHeartbeatInterval is how often the node's Lease is renewed,
	// as a kubelet does.
	DefaultHeartbeatInterval = 10 * time.Second
	// NodeLeaseNamespace holds the nodes' heartbeat Leases.
	NodeLeaseNamespace = corev1.NamespaceNodeLease
	// nodeLeaseSeconds is the Lease's duration, the kubelet's default.
	nodeLeaseSeconds = 40
	// ExitCodeAnnotation on a Job's pod (put it on the Job's pod template)
	// is the exit code its containers end with: a decimal from 0 to 255,
	// "0" when absent. Anything but 0 makes the pod Failed.
	ExitCodeAnnotation = "podsim.kloop.dev/exit-code"
)

// Options configures Run. The zero value simulates the Node "kloop-node"
// for the pods of every namespace.
type Options struct {
	// NodeName is the simulated Node's name. Default DefaultNodeName.
	NodeName string
	// Namespace limits podsim to the pods of one namespace; "" means all.
	// Two podsims with different Namespaces and NodeNames share a cluster
	// without meeting.
	Namespace string
	// Workers is how many pods are handled at once. Default DefaultWorkers.
	Workers int
	// HeartbeatInterval is how often the node's Lease in kube-node-lease
	// is renewed, so that a node-lifecycle controller, where one runs,
	// keeps the node Ready. Default DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// Logger receives logs. Default slog.Default().
	Logger *slog.Logger
	// Registry receives the informer's, workqueue's and controller's
	// metrics. Default: the kloop registry.
	Registry *prometheus.Registry
}

// Run registers the Node, then binds, starts and finishes pods (see the
// package documentation) until ctx is done; it returns nil once stopped
// through ctx, after the pod updates in flight.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if opts.NodeName == "" {
		opts.NodeName = DefaultNodeName
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	log := opts.Logger.With("node", opts.NodeName)

	app, err := kloop.New(cfg, kloop.Options{Name: "podsim", Namespace: opts.Namespace, Logger: log, Registry: opts.Registry})
	if err != nil {
		return err
	}
	pods := kloop.Objects[*corev1.Pod](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("pods")})
	// Nodes and Leases are only written: no informer for them.
	nodes, err := client.NewResource[*corev1.Node](app.Client(), corev1.SchemeGroupVersion.WithResource("nodes"))
	if err != nil {
		return err
	}
	leases, err := client.NewResource[*coordinationv1.Lease](app.Client(), coordinationv1.SchemeGroupVersion.WithResource("leases"))
	if err != nil {
		return err
	}
	// Bindings are a subresource the generic client does not write.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	node, err := registerNode(ctx, nodes, opts.NodeName)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped through ctx before it started
		}
		return err
	}
	log.Info("Registered node")

	k := &kubelet{node: opts.NodeName, pods: pods, bindings: cs.CoreV1(), log: log, ips: newIPPool()}
	mine := controller.Filter(func(p *corev1.Pod) bool {
		return p.Spec.NodeName == opts.NodeName || (p.Spec.NodeName == "" && p.Spec.SchedulerName == SchedulerName)
	})
	// A pass moves a pod one step (started, then finished for a Job's
	// pod), and the event of its own write brings the pod back for the
	// next: the controller must see its own writes.
	reconcileOwnWrites := func(o *controller.Options[cache.Key]) { o.ReconcileOwnWrites = true }
	if _, err := kloop.NewController(app, "podsim", k.Reconcile).For(pods.Where(mine)).Workers(opts.Workers).WithOptions(reconcileOwnWrites).Complete(); err != nil {
		return err
	}
	app.Add(manager.RunnableFunc(func(ctx context.Context) error {
		heartbeat(ctx, leases, node, opts.HeartbeatInterval, log)
		return nil
	}))
	return app.Run(ctx)
}

// heartbeat renews the node's Lease every interval until ctx is done.
// Failures are logged and retried at the next beat.
func heartbeat(ctx context.Context, leases *client.Resource[*coordinationv1.Lease], node *corev1.Node, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := renewLease(ctx, leases, node); err != nil && ctx.Err() == nil {
			log.Warn("Renewing the node lease", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renewLease creates the node's Lease, owned by the Node as a kubelet's
// is, or moves its renewTime to now.
func renewLease(ctx context.Context, leases *client.Resource[*coordinationv1.Lease], node *corev1.Node) error {
	now := metav1.NowMicro()
	lease, err := leases.Get(ctx, NodeLeaseNamespace, node.Name)
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: node.Name, Namespace: NodeLeaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(node.Name),
				LeaseDurationSeconds: ptr.To[int32](nodeLeaseSeconds),
				RenewTime:            &now,
			},
		})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity = ptr.To(node.Name)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](nodeLeaseSeconds)
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease)
	return err
}

// registerNode creates the Node, or takes over one of that name, sets its
// status to Ready and returns it.
func registerNode(ctx context.Context, nodes *client.Resource[*corev1.Node], name string) (*corev1.Node, error) {
	node, err := nodes.Get(ctx, "", name)
	if apierrors.IsNotFound(err) {
		node, err = nodes.Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       runtime.GOOS,
				"kubernetes.io/arch":     runtime.GOARCH,
				"kloop.dev/podsim":       "true",
			}},
			Spec: corev1.NodeSpec{PodCIDR: PodCIDR, PodCIDRs: []string{PodCIDR}},
		})
	}
	if err != nil {
		return nil, fmt.Errorf("register node %s: %w", name, err)
	}
	node = node.DeepCopy()
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "podsim is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: now, LastTransitionTime: now},
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: NodeIP}, {Type: corev1.NodeHostName, Address: name}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion:          "podsim",
			OperatingSystem:         runtime.GOOS,
			Architecture:            runtime.GOARCH,
			ContainerRuntimeVersion: "podsim://0",
		},
	}
	node, err = nodes.UpdateStatus(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("register node %s: status: %w", name, err)
	}
	return node, nil
}

// kubelet is the reconciler: one pod at a time, one step at a time; each
// step's write brings the pod back through the informer for the next.
type kubelet struct {
	node     string
	pods     *kloop.Handle[*corev1.Pod] // cached reads with read-your-writes
	bindings corev1client.PodsGetter    // for pods/binding
	log      *slog.Logger
	ips      *ipPool
}

func (k *kubelet) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	pod, err := k.pods.Get(ctx, key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		k.ips.release(key)
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	log := k.log.With("pod", key.String())
	switch {
	case pod.Spec.NodeName == "":
		if pod.DeletionTimestamp != nil || pod.Spec.SchedulerName != SchedulerName {
			return controller.Result{}, nil
		}
		err := k.bindings.Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: k.node},
		}, metav1.CreateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Bound already (our cache lags the binding) or gone: the
			// informer brings the pod's next state.
			return controller.Result{}, nil
		}
		if err != nil {
			return controller.Result{}, fmt.Errorf("bind pod %s: %w", key, err)
		}
		log.Debug("Bound pod")
	case pod.Spec.NodeName != k.node:
		return controller.Result{}, nil
	case pod.DeletionTimestamp != nil:
		err := k.pods.Delete(ctx, pod.Namespace, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return controller.Result{}, nil
		}
		if err != nil {
			return controller.Result{}, fmt.Errorf("delete pod %s: %w", key, err)
		}
		k.ips.release(key)
		log.Debug("Deleted terminating pod")
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		// Finished: a kubelet never starts it again.
	case !Running(pod):
		if _, err := k.pods.UpdateStatus(ctx, k.running(pod)); err != nil {
			return controller.Result{}, fmt.Errorf("start pod %s: %w", key, err)
		}
		log.Debug("Started pod")
	case ownedByJob(pod):
		// It ran (the write above brought it back here): its containers
		// exit, so the Job controller can count it.
		code, err := exitCode(pod)
		if err != nil {
			// The pod stays Running; fixing the annotation brings it back.
			log.Error("Not finishing the Job's pod", "err", err)
			return controller.Result{}, nil
		}
		if _, err := k.pods.UpdateStatus(ctx, finished(pod, code)); err != nil {
			return controller.Result{}, fmt.Errorf("finish pod %s: %w", key, err)
		}
		log.Debug("Finished the Job's pod", "exitCode", code)
	}
	return controller.Result{}, nil
}

// Running reports whether pod is as podsim leaves a started pod: phase
// Running, Ready, with a pod IP.
func Running(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// running returns a copy of pod with the status of a pod whose containers
// all started and are ready.
func (k *kubelet) running(pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	now := metav1.Now()
	st := &p.Status
	st.Phase = corev1.PodRunning
	st.HostIP = NodeIP
	st.HostIPs = []corev1.HostIP{{IP: NodeIP}}
	if st.PodIP == "" {
		ip := k.ips.assign(cache.KeyOf(pod))
		st.PodIP = ip
		st.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	for _, t := range []corev1.PodConditionType{
		corev1.PodScheduled, corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady,
	} {
		setCondition(st, t, now)
	}
	st.InitContainerStatuses = nil
	for _, c := range p.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(p, c.Name), Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: containerID(p, c.Name),
			}},
		})
	}
	st.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(p, c.Name),
			Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return p
}

// ownedByJob reports whether a batch/v1 Job owns pod.
func ownedByJob(pod *corev1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Job" && o.APIVersion == "batch/v1" {
			return true
		}
	}
	return false
}

// exitCode is the exit code ExitCodeAnnotation asks of pod's containers.
func exitCode(pod *corev1.Pod) (int32, error) {
	v, ok := pod.Annotations[ExitCodeAnnotation]
	if !ok {
		return 0, nil
	}
	code, err := strconv.ParseInt(v, 10, 32)
	if err != nil || code < 0 || code > 255 {
		return 0, fmt.Errorf("annotation %s of pod %s/%s is %q: want an exit code from 0 to 255, 0 to succeed", ExitCodeAnnotation, pod.Namespace, pod.Name, v)
	}
	return int32(code), nil
}

// finished returns a copy of the running pod with the status of a pod
// whose containers all exited with code: Succeeded for 0, else Failed
// (podsim restarts no container, whatever the restart policy).
func finished(pod *corev1.Pod, code int32) *corev1.Pod {
	p := pod.DeepCopy()
	now := metav1.Now()
	st := &p.Status
	reason := "Completed"
	st.Phase = corev1.PodSucceeded
	if code != 0 {
		st.Phase, reason = corev1.PodFailed, "Error"
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status != corev1.ConditionFalse {
			// A kubelet's reason for the conditions of a finished pod.
			c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, "PodCompleted", now
		}
	}
	for i := range st.ContainerStatuses {
		c := &st.ContainerStatuses[i]
		started := now
		if c.State.Running != nil {
			started = c.State.Running.StartedAt
		}
		c.Ready, c.Started = false, ptr.To(false)
		c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: now, ContainerID: c.ContainerID,
		}}
	}
	return p
}

// setCondition sets condition t True, keeping its transition time if it
// already was.
func setCondition(st *corev1.PodStatus, t corev1.PodConditionType, now metav1.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != corev1.ConditionTrue {
			c.Status, c.LastTransitionTime, c.Reason, c.Message = corev1.ConditionTrue, now, "", ""
		}
		c.LastProbeTime = metav1.Time{}
		return
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
}

func imageID(image string) string { return "podsim://" + image }

func containerID(p *corev1.Pod, name string) string {
	return "podsim://" + string(p.UID) + "/" + name
}

// ipPool hands out pod IPs from PodCIDR, one per pod, reused once freed.
type ipPool struct {
	mu    sync.Mutex
	next  netip.Addr
	last  netip.Addr
	free  []netip.Addr
	inUse map[cache.Key]netip.Addr
}

func newIPPool() *ipPool {
	prefix := netip.MustParsePrefix(PodCIDR)
	b := prefix.Addr().As4()
	// The host bits all ones is the broadcast address; the one before it
	// is the last usable.
	for i := prefix.Bits(); i < 32; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	last := netip.AddrFrom4(b).Prev()
	return &ipPool{next: prefix.Addr().Next(), last: last, inUse: make(map[cache.Key]netip.Addr)}
}

func (p *ipPool) assign(k cache.Key) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.inUse[k]; ok {
		return a.String()
	}
	var a netip.Addr
	switch {
	case len(p.free) > 0:
		a, p.free = p.free[len(p.free)-1], p.free[:len(p.free)-1]
	case p.next.Compare(p.last) <= 0:
		a, p.next = p.next, p.next.Next()
	default:
		// Exhausted: share the last address rather than fail the pod.
		a = p.last
	}
	p.inUse[k] = a
	return a.String()
}

func (p *ipPool) release(k cache.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.inUse[k]; ok {
		delete(p.inUse, k)
		p.free = append(p.free, a)
	}
}
