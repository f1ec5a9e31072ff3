package foo_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/testenv/await"
)

// kubectl events, as an operator runs it, lists the Foo controller's
// Synced event, which the recorder wrote through events.k8s.io/v1.
func TestFoo_KubectlEventsListsTheControllersEventWrittenThroughEventsV1(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("needs kubectl on PATH")
	}
	h := newHarness(t)
	h.createFoo(newFoo("listed", "listed", ptr.To[int32](1)))

	var ev eventsv1.Event
	await.Watched(t, "the Synced Event of Foo listed through events.k8s.io/v1", h.kc.EventsV1().Events(h.ns), metav1.ListOptions{}, func(ctx context.Context) (bool, error) {
		l, err := h.kc.EventsV1().Events(h.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range l.Items {
			if e.Regarding.Kind == "Foo" && e.Regarding.Name == "listed" && e.Reason == foo.SuccessSynced {
				ev = e
				return true, nil
			}
		}
		return false, nil
	})
	if ev.Type != corev1.EventTypeNormal || ev.Note != foo.MessageResourceSynced || ev.ReportingController != foo.ControllerName ||
		ev.ReportingInstance == "" || ev.Action == "" || ev.EventTime.IsZero() {
		t.Errorf("Synced Event %s %q note %q from %q/%q at %v; want Normal %q from %s, with an instance, an action and an eventTime",
			ev.Type, ev.Action, ev.Note, ev.ReportingController, ev.ReportingInstance, ev.EventTime, foo.MessageResourceSynced, foo.ControllerName)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", h.env.KubeconfigPath, "-n", h.ns, "events", "--for", "foo/listed").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl events --for foo/listed: %v\n%s", err, out)
	}
	var found bool
	for l := range strings.Lines(string(out)) {
		f := strings.Fields(l)
		// LAST SEEN, TYPE, REASON, OBJECT, MESSAGE.
		if len(f) >= 5 && f[1] == "Normal" && f[2] == foo.SuccessSynced && f[3] == "Foo/listed" && strings.Contains(l, foo.MessageResourceSynced) {
			found = true
		}
	}
	if !found {
		t.Errorf("kubectl events --for foo/listed printed\n%s\nwant a line: Normal %s Foo/listed %s", out, foo.SuccessSynced, foo.MessageResourceSynced)
	}
}
