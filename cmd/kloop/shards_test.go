package main

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kloop demo --replicas 3: three replicas split the Foos, every Foo gets its
// Deployment, the shard table shows three live members; a stopped replica's
// Foos are taken over and it takes its share back when it returns; SIGINT
// exits 0.
func TestDemo_ThreeReplicasShareTheFoosAndHandOverWhenOneStops(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := command(ctx, "demo", "--replicas", "3", "--namespaces", "15", "--handover-every", "8s")
	lines, stderr := startLines(t, cmd)
	var seen []string
	next := func(what string, re *regexp.Regexp) []string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("output ended before %s; output:\n%s\nstderr:\n%s", what, strings.Join(seen, "\n"), stderr.String())
				}
				seen = append(seen, l)
				if m := re.FindStringSubmatch(l); m != nil {
					return m
				}
			case <-ctx.Done():
				t.Fatalf("no %s: %v; output:\n%s", what, context.Cause(ctx), strings.Join(seen, "\n"))
			}
		}
	}
	all3 := regexp.MustCompile(`^replica-1 (\d+) slots, (\d+) Foos, \d+ reconciles \| replica-2 (\d+) slots, (\d+) Foos, \d+ reconciles \| replica-3 (\d+) slots, (\d+) Foos, \d+ reconciles — settled, 30 of 30 Foos' Deployments cached$`)
	m := next("three replicas settled with every Foo's Deployment", all3)
	for i := 1; i < len(m); i += 2 {
		if m[i] == "0" || m[i+1] == "0" {
			t.Errorf("a replica works on nothing: %s", m[0])
		}
	}
	next("the shard table", regexp.MustCompile(`^  replica-3 +yes +\d+ +\d+: `))
	next("the stop of replica-3", regexp.MustCompile(`^# stopping replica-3`))
	next("two replicas with every Foo", regexp.MustCompile(`^replica-1 32 slots, \d+ Foos, \d+ reconciles \| replica-2 32 slots, \d+ Foos, \d+ reconciles — settled, 30 of 30 Foos' Deployments cached$`))
	next("replica-3's return", regexp.MustCompile(`^# starting replica-3 again`))
	next("three replicas again", all3)

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kloop demo --replicas 3 after SIGINT: %v, want exit code 0; stderr:\n%s", err, stderr.String())
	}
}
