package notifier

// Checkpoint types.
const (
	CheckpointConfigMap = "configmap"
	CheckpointFile      = "file"
	CheckpointNone      = "none"
)

// DefaultCheckpointName is the checkpoint ConfigMap's name unless the
// config sets one.
const DefaultCheckpointName = "kubewatch-checkpoint"

// DefaultCheckpointMaxObjects bounds the objects a checkpoint records.
const DefaultCheckpointMaxObjects = 10000

// CheckpointConfig says where the notifier keeps what it has notified, so
// that a restart notifies what changed while it was down and nothing
// twice.
type CheckpointConfig struct {
	// Type is configmap (the default), file or none.
	Type string
	// Namespace and Name of the ConfigMap. Namespace defaults to the
	// watched namespace, else $POD_NAMESPACE, else the pod's service
	// account namespace, else "default"; Name to DefaultCheckpointName.
	Namespace, Name string
	// Path of the file (type file).
	Path string
	// MaxObjects bounds the objects recorded; default
	// DefaultCheckpointMaxObjects. Past it the checkpoint is marked
	// overflowed (see the package doc).
	MaxObjects int
}
