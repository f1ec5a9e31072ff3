package main

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kloop demo --clusters 2, alone and with --replicas 2: the example Foo of
// each cluster gets its Deployment and a Running pod in that cluster and
// becomes available, each line naming its cluster; with two replicas they
// say they share the clusters as a shard group; SIGINT exits 0.
func TestDemo_ClustersEachExampleFooBecomesAvailableAloneAndWithReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("needs control planes")
	}
	for _, args := range [][]string{{"--clusters", "2"}, {"--clusters", "2", "--replicas", "2"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := command(context.Background(), append([]string{"demo"}, args...)...)
			lines, stderr := startLines(t, cmd)
			want := map[string]*regexp.Regexp{}
			for _, c := range []string{"c1", "c2"} {
				want[c+"'s Foo with 1 available"] = regexp.MustCompile(`^\[` + c + `\] foo/example-foo +deploymentName=example-foo spec\.replicas=1 status\.availableReplicas=1$`)
				want[c+"'s owned Deployment"] = regexp.MustCompile(`^\[` + c + `\] deployment/example-foo +replicas=1 .*owner=Foo/example-foo$`)
			}
			want["the debug page with the clusters"] = regexp.MustCompile(`^# the Foo controller's live page, with its clusters: http://127\.0\.0\.1:\d+/debug/`)
			if len(args) > 2 {
				want["the shard group"] = regexp.MustCompile(`^# 2 Foo-controller replicas share the 2 clusters: shard group kloop-demo`)
			}
			var seen []string
			deadline := time.After(4 * time.Minute)
			for len(want) > 0 {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("kloop demo's output ended; missing %v; output:\n%s\nstderr:\n%s", keys(want), strings.Join(seen, "\n"), stderr.String())
					}
					seen = append(seen, l)
					for what, re := range want {
						if re.MatchString(l) {
							delete(want, what)
						}
					}
				case <-deadline:
					t.Fatalf("within 4 minutes kloop demo %s did not print %v; output:\n%s", strings.Join(args, " "), keys(want), strings.Join(seen, "\n"))
				}
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			for range lines {
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("kloop demo %s after SIGINT: %v, want exit code 0; stderr:\n%s", strings.Join(args, " "), err, stderr.String())
			}
		})
	}
}
