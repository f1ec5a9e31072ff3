package debug

import (
	"time"

	"github.com/kloop-dev/kloop/internal/fleet"
)

// clusterState is one cluster of a fleet App (kloop.Options.Fleet).
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
func buildCluster(st fleet.ClusterStatus) clusterState {
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
