package debug

import "time"

// ClusterStatus is one cluster of a fleet (package fleet) as the debug
// page shows it: a runnable of the App's with a method
// Clusters() []ClusterStatus is listed under "clusters".
type ClusterStatus struct {
	Name string
	// Origin is where the cluster is defined: "home", "file <path>" or
	// "Secret <namespace>/<name>".
	Origin string
	// State is "joining", "joined", "failed" (retried after a back-off) or
	// "invalid" (its definition cannot be used).
	State string
	// Since is when the cluster entered State.
	Since time.Time
	// Err is the last error: why an attempt failed, why the definition
	// cannot be used, or an informer's last list/watch error while joined.
	Err error
	// Objects is the number of objects in the cluster's caches.
	Objects int
}

// clusterState is one cluster of a fleet App (package fleet).
type clusterState struct {
	Name      string    `json:"name"`
	Origin    string    `json:"origin"`
	State     string    `json:"state"`
	Since     time.Time `json:"since"`
	Objects   int       `json:"objects"`
	LastError string    `json:"lastError,omitempty"`
	Level     string    `json:"level"`
	Trouble   []string  `json:"trouble"`
}

// buildCluster rates a cluster: failed or invalid is bad; joining, or
// joined with an informer's error, is a warning.
func buildCluster(st ClusterStatus) clusterState {
	c := clusterState{Name: st.Name, Origin: st.Origin, State: st.State, Since: st.Since, Objects: st.Objects, Level: LevelOK, Trouble: []string{}}
	if st.Err != nil {
		c.LastError = st.Err.Error()
	}
	switch {
	case st.State == "failed" || st.State == "invalid":
		c.Level = LevelBad
		c.Trouble = append(c.Trouble, st.State+": "+c.LastError)
	case st.State != "joined":
		c.Level = LevelWarn
		c.Trouble = append(c.Trouble, st.State)
	case st.Err != nil:
		c.Level = LevelWarn
		c.Trouble = append(c.Trouble, c.LastError)
	}
	return c
}
