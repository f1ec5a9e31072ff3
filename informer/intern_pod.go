package informer

import (
	"encoding/binary"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// This file shares the parts of pod specs that repeat between objects. The
// replicas of one ReplicaSet (and the pods of a Job, a StatefulSet, a
// DaemonSet) carry the same containers' env, ports, resources, probes and
// mounts, and the same volumes, node selector and tolerations: a decoded
// Pod holds each as allocations of its own, some ten kilobytes a pod. Each
// such part is looked up by its protobuf encoding, the canonical form of a
// value of the generated types (map entries sorted by key), and replaced by
// the first equal one the informer saw (equal but for an empty list or map
// against a nil one, which the encoding and the API do not tell apart; a
// protobuf decode makes neither, a JSON decode may); the structs that hold them (the Pod, its containers and
// volumes) stay each object's own, so a part unique to a pod (the
// service-account token's volume, a node name) costs only itself. A pod
// template's container list, which holds nothing of one pod's, is shared
// whole.
//
// Like the rest of the interner, this runs on the reflector's goroutine
// while the informer is the object's only holder. A part it shares is
// never written again: cached objects are read-only, the mutation detector
// (cache.MutationDetectorEnv) compares every object, shared parts
// included, with the copy it took when the object was stored, and a deep
// copy (DeepCopy, cache.Copy) copies shared parts like any other.

// message is what the generated protobuf code of the API types provides.
type message interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// table is one kind of shared part, by its encoding. Bounded as the
// interner's other tables: full, it starts afresh.
type table[V any] struct{ m map[string]V }

func (t *table[V]) get(key []byte, v V) V {
	if s, ok := t.m[string(key)]; ok {
		return s
	}
	if t.m == nil || len(t.m) >= internMaxSets {
		t.m = make(map[string]V)
	}
	t.m[string(key)] = v
	return v
}

// podTables are the interner's tables of pod spec parts.
type podTables struct {
	env       table[[]corev1.EnvVar]
	envFrom   table[[]corev1.EnvFromSource]
	ports     table[[]corev1.ContainerPort]
	mounts    table[[]corev1.VolumeMount]
	resize    table[[]corev1.ContainerResizePolicy]
	resources table[corev1.ResourceRequirements]
	probes    table[*corev1.Probe]
	lifecycle table[*corev1.Lifecycle]
	secCtx    table[*corev1.SecurityContext]
	strs      table[[]string] // command and args
	volumes   table[corev1.VolumeSource]
	tolerate  table[[]corev1.Toleration]
	pullSecr  table[[]corev1.LocalObjectReference]
	spread    table[[]corev1.TopologySpreadConstraint]
	gates     table[[]corev1.PodReadinessGate]
	affinity  table[*corev1.Affinity]
	podSecCtx table[*corev1.PodSecurityContext]
	dnsConfig table[*corev1.PodDNSConfig]
	// containers holds whole container lists, of pod templates only.
	containers table[[]corev1.Container]
	int64s     map[int64]*int64
	int32s     map[int32]*int32
	bools      [2]*bool
	preempt    map[corev1.PreemptionPolicy]*corev1.PreemptionPolicy
}

// appendEncoded appends m's encoding to b, prefixed by its length, so that
// the encodings of a list's items make an unambiguous key.
func appendEncoded(b []byte, m message) []byte {
	n := m.Size()
	b = binary.AppendUvarint(b, uint64(n))
	at := len(b)
	for cap(b) < at+n {
		b = append(b[:cap(b)], 0)
	}
	b = b[:at+n]
	if _, err := m.MarshalToSizedBuffer(b[at:]); err != nil {
		// The generated Marshal fails only on a broken message type.
		panic("informer: encoding a pod spec part: " + err.Error())
	}
	return b
}

// shareList returns the shared list equal to items.
func shareList[E any, P interface {
	*E
	message
}](in *interner, t *table[[]E], items []E) []E {
	if len(items) == 0 {
		return items
	}
	in.key = in.key[:0]
	for i := range items {
		in.key = appendEncoded(in.key, P(&items[i]))
	}
	return t.get(in.key, items)
}

// sharePtr returns the shared value equal to *p.
func sharePtr[E any, P interface {
	*E
	message
}](in *interner, t *table[*E], p *E) *E {
	if p == nil {
		return nil
	}
	in.key = appendEncoded(in.key[:0], P(p))
	return t.get(in.key, p)
}

// shareValue returns the shared value equal to *v (a struct value whose
// maps, slices and pointers are then shared).
func shareValue[E any, P interface {
	*E
	message
}](in *interner, t *table[E], v *E) E {
	in.key = appendEncoded(in.key[:0], P(v))
	return t.get(in.key, *v)
}

func (in *interner) shareStrings(ss []string) []string {
	if len(ss) == 0 {
		return ss
	}
	in.key = in.key[:0]
	for _, s := range ss {
		in.key = binary.AppendUvarint(in.key, uint64(len(s)))
		in.key = append(in.key, s...)
	}
	return in.pod.strs.get(in.key, ss)
}

func shareScalar[V comparable](m *map[V]*V, p *V) *V {
	if p == nil {
		return nil
	}
	if s, ok := (*m)[*p]; ok {
		return s
	}
	if *m == nil || len(*m) >= internMaxSets {
		*m = make(map[V]*V)
	}
	(*m)[*p] = p
	return p
}

func (in *interner) shareBool(p *bool) *bool {
	if p == nil {
		return nil
	}
	i := 0
	if *p {
		i = 1
	}
	if in.pod.bools[i] == nil {
		in.pod.bools[i] = p
	}
	return in.pod.bools[i]
}

// podSpec shares the repeated parts of spec, in place.
func (in *interner) podSpec(spec *corev1.PodSpec) {
	t := &in.pod
	for i := range spec.Volumes {
		// The name is left as it is: the token volume's is each pod's
		// own and would only churn the string table.
		v := &spec.Volumes[i]
		v.VolumeSource = shareValue(in, &t.volumes, &v.VolumeSource)
	}
	for i := range spec.InitContainers {
		in.container(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		in.container(&spec.Containers[i])
	}
	spec.RestartPolicy = corev1.RestartPolicy(in.str(string(spec.RestartPolicy)))
	spec.DNSPolicy = corev1.DNSPolicy(in.str(string(spec.DNSPolicy)))
	spec.ServiceAccountName = in.str(spec.ServiceAccountName)
	spec.DeprecatedServiceAccount = in.str(spec.DeprecatedServiceAccount)
	spec.NodeName = in.str(spec.NodeName)
	spec.SchedulerName = in.str(spec.SchedulerName)
	spec.PriorityClassName = in.str(spec.PriorityClassName)
	spec.Subdomain = in.str(spec.Subdomain)
	if len(spec.NodeSelector) > 0 {
		spec.NodeSelector = in.labelSet(spec.NodeSelector)
	}
	spec.Tolerations = shareList(in, &t.tolerate, spec.Tolerations)
	spec.ImagePullSecrets = shareList(in, &t.pullSecr, spec.ImagePullSecrets)
	spec.TopologySpreadConstraints = shareList(in, &t.spread, spec.TopologySpreadConstraints)
	spec.ReadinessGates = shareList(in, &t.gates, spec.ReadinessGates)
	spec.Affinity = sharePtr(in, &t.affinity, spec.Affinity)
	spec.SecurityContext = sharePtr(in, &t.podSecCtx, spec.SecurityContext)
	spec.DNSConfig = sharePtr(in, &t.dnsConfig, spec.DNSConfig)
	spec.TerminationGracePeriodSeconds = shareScalar(&t.int64s, spec.TerminationGracePeriodSeconds)
	spec.ActiveDeadlineSeconds = shareScalar(&t.int64s, spec.ActiveDeadlineSeconds)
	spec.Priority = shareScalar(&t.int32s, spec.Priority)
	spec.PreemptionPolicy = shareScalar(&t.preempt, spec.PreemptionPolicy)
	spec.EnableServiceLinks = in.shareBool(spec.EnableServiceLinks)
	spec.AutomountServiceAccountToken = in.shareBool(spec.AutomountServiceAccountToken)
}

// container shares the repeated parts of c, in place.
func (in *interner) container(c *corev1.Container) {
	t := &in.pod
	c.Name = in.str(c.Name)
	c.Image = in.str(c.Image)
	c.WorkingDir = in.str(c.WorkingDir)
	c.TerminationMessagePath = in.str(c.TerminationMessagePath)
	c.TerminationMessagePolicy = corev1.TerminationMessagePolicy(in.str(string(c.TerminationMessagePolicy)))
	c.ImagePullPolicy = corev1.PullPolicy(in.str(string(c.ImagePullPolicy)))
	c.Command = in.shareStrings(c.Command)
	c.Args = in.shareStrings(c.Args)
	c.Ports = shareList(in, &t.ports, c.Ports)
	c.EnvFrom = shareList(in, &t.envFrom, c.EnvFrom)
	c.Env = shareList(in, &t.env, c.Env)
	c.Resources = shareValue(in, &t.resources, &c.Resources)
	c.ResizePolicy = shareList(in, &t.resize, c.ResizePolicy)
	if shared := shareList(in, &t.mounts, c.VolumeMounts); len(shared) > 0 && &shared[0] == &c.VolumeMounts[0] {
		// First seen (a pod's own service-account token mount makes its
		// list unique): its paths repeat all the same.
		for i := range shared {
			shared[i].MountPath = in.str(shared[i].MountPath)
		}
	} else {
		c.VolumeMounts = shared
	}
	c.LivenessProbe = sharePtr(in, &t.probes, c.LivenessProbe)
	c.ReadinessProbe = sharePtr(in, &t.probes, c.ReadinessProbe)
	c.StartupProbe = sharePtr(in, &t.probes, c.StartupProbe)
	c.Lifecycle = sharePtr(in, &t.lifecycle, c.Lifecycle)
	c.SecurityContext = sharePtr(in, &t.secCtx, c.SecurityContext)
}

// podStatus shares the strings of status that repeat between pods.
func (in *interner) podStatus(st *corev1.PodStatus) {
	st.Phase = corev1.PodPhase(in.str(string(st.Phase)))
	st.QOSClass = corev1.PodQOSClass(in.str(string(st.QOSClass)))
	st.HostIP = in.str(st.HostIP)
	st.NominatedNodeName = in.str(st.NominatedNodeName)
	for i := range st.HostIPs {
		st.HostIPs[i].IP = in.str(st.HostIPs[i].IP)
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type = corev1.PodConditionType(in.str(string(c.Type)))
		c.Status = corev1.ConditionStatus(in.str(string(c.Status)))
		c.Reason = in.str(c.Reason)
	}
	for _, list := range [...][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			s := &list[i]
			s.Name = in.str(s.Name)
			s.Image = in.str(s.Image)
			s.ImageID = in.str(s.ImageID)
		}
	}
}

// podTemplate shares the repeated parts of the objects that carry a pod
// template.
func (in *interner) podTemplate(obj any) {
	switch o := obj.(type) {
	case *corev1.Pod:
		in.podSpec(&o.Spec)
		in.podStatus(&o.Status)
	case *corev1.PodTemplate:
		in.templateSpec(&o.Template.Spec)
	case *appsv1.ReplicaSet:
		in.templateSpec(&o.Spec.Template.Spec)
	case *appsv1.Deployment:
		in.templateSpec(&o.Spec.Template.Spec)
	case *appsv1.StatefulSet:
		in.templateSpec(&o.Spec.Template.Spec)
	case *appsv1.DaemonSet:
		in.templateSpec(&o.Spec.Template.Spec)
	case *batchv1.Job:
		in.templateSpec(&o.Spec.Template.Spec)
	}
}

// templateSpec shares the parts of a pod template's spec, and its
// container lists whole: a template has no pod's own mounts (a Pod's
// service-account token makes its list unique), so the ReplicaSets of one
// Deployment, and the workloads made from one manifest, carry equal
// lists.
func (in *interner) templateSpec(spec *corev1.PodSpec) {
	in.podSpec(spec)
	spec.InitContainers = shareList(in, &in.pod.containers, spec.InitContainers)
	spec.Containers = shareList(in, &in.pod.containers, spec.Containers)
}
