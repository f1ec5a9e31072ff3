package debug

import (
	"errors"
	"testing"
	"time"
)

func TestBuild_ClustersAreListedAndRatedByState(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := build(input{Time: t0, Clusters: []ClusterStatus{
		{Name: "east", Origin: "home", State: "joined", Since: t0, Objects: 12},
		{Name: "west", Origin: "Secret ns/west", State: "failed", Since: t0, Err: errors.New("x509: certificate signed by unknown authority")},
		{Name: "north", Origin: "file /k/north", State: "joined", Err: errors.New("foos: connection refused")},
		{Name: "south", Origin: "file /k/south", State: "joining"},
	}}, nil, time.Minute, 5*time.Minute)
	if len(s.Clusters) != 4 {
		t.Fatalf("clusters = %+v, want 4", s.Clusters)
	}
	want := map[string]string{"east": LevelOK, "west": LevelBad, "north": LevelWarn, "south": LevelWarn}
	for _, c := range s.Clusters {
		if c.Level != want[c.Name] {
			t.Errorf("cluster %s: level %s, want %s (%+v)", c.Name, c.Level, want[c.Name], c)
		}
	}
	if w := s.Clusters[1]; w.LastError == "" || len(w.Trouble) != 1 || w.Objects != 0 {
		t.Errorf("west = %+v, want its error as lastError and trouble", w)
	}
	if s.Clusters[0].Objects != 12 || s.Clusters[0].Origin != "home" {
		t.Errorf("east = %+v", s.Clusters[0])
	}
	if s.Level != LevelBad {
		t.Errorf("snapshot level %s with a failed cluster, want bad", s.Level)
	}
	if empty := build(input{Time: t0}, nil, time.Minute, time.Minute); empty.Clusters == nil || len(empty.Clusters) != 0 {
		t.Errorf("without a fleet, clusters = %#v, want an empty list", empty.Clusters)
	}
}
