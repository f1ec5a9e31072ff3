package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/testenv"
)

// SIGKILL while a burst is being delivered, one notification in flight at
// the receiver: after the restart every change of the burst has arrived
// at least once (the checkpoint, in a ConfigMap, lets nothing fall
// between the two lives), and nothing else has.
func TestNotifier_SIGKILLInTheMiddleOfABurstLosesNothing(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "notifier-kill")
	cms := kc.CoreV1().ConfigMaps(ns)

	const burst, killAt = 60, 15
	var (
		mu       sync.Mutex
		got      []string
		held     bool // request killAt was held
		more     = make(chan struct{})
		inFlight = make(chan struct{}) // closed when request killAt arrives
		killed   = make(chan struct{}) // closed once the first notifier is dead
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			EventMeta struct{ Kind, Name, Reason string } `json:"eventmeta"`
		}
		_ = json.NewDecoder(r.Body).Decode(&p)
		mu.Lock()
		if len(got) == killAt-1 && !held {
			held = true
			mu.Unlock()
			close(inFlight)
			<-killed // never answered: the notifier dies with it in flight
			return
		}
		got = append(got, p.EventMeta.Reason+" "+p.EventMeta.Kind+" "+p.EventMeta.Name)
		close(more)
		more = make(chan struct{})
		mu.Unlock()
	}))
	defer srv.Close()
	var killOnce sync.Once
	defer killOnce.Do(func() { close(killed) })

	config := filepath.Join(t.TempDir(), "kubewatch.yaml")
	doc := "namespace: " + ns + "\nresource: {cm: true}\nhandler:\n  webhook: {url: '" + srv.URL + "/hook'}\n"
	if err := os.WriteFile(config, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(name string) *reexecProc {
		cmd := reexec.Command(context.Background(), "--config", config, "--kubeconfig", e.KubeconfigPath, "--metrics-bind-address", "0")
		_, logs := reexec.Start(t, name, cmd)
		logs.WaitFor(t, name+" synced", regexp.MustCompile(`Notifier synced`))
		return &reexecProc{cmd: cmd.Process}
	}
	first := start("first notifier")

	created := make(chan error, 1)
	go func() {
		for i := range burst {
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("burst-%d", i)}}, metav1.CreateOptions{}); err != nil {
				created <- err
				return
			}
		}
		created <- nil
	}()
	select {
	case <-inFlight:
	case <-time.After(60 * time.Second):
		t.Fatal("the burst did not reach the receiver within 60s")
	}
	if err := first.cmd.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_, _ = first.cmd.Wait()
	killOnce.Do(func() { close(killed) })
	if err := <-created; err != nil {
		t.Fatal(err)
	}

	start("second notifier")
	want := map[string]bool{}
	for i := range burst {
		want[fmt.Sprintf("Created ConfigMap burst-%d", i)] = true
	}
	deadline := time.After(90 * time.Second)
	for {
		mu.Lock()
		missing := 0
		seen := map[string]int{}
		for _, g := range got {
			seen[g]++
		}
		for w := range want {
			if seen[w] == 0 {
				missing++
			}
		}
		var extra []string
		for g := range seen {
			if !want[g] {
				extra = append(extra, g)
			}
		}
		ch := more
		total := len(got)
		all := strings.Join(got, "\n")
		mu.Unlock()
		if len(extra) > 0 {
			t.Fatalf("notifications of something that did not happen: %q", extra)
		}
		if missing == 0 {
			t.Logf("all %d creates arrived; %d notifications in all (at least once: %d sent again)", burst, total, total-burst)
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d of the %d creates never arrived after the restart; got:\n%s", missing, burst, all)
		}
	}
}

type reexecProc struct{ cmd *os.Process }
