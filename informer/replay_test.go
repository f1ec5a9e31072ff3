package informer

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop/watcher"
)

// A periodic replay of an encoded cache decodes each object as it is
// delivered: while the handler is busy with the first, the replay holds the
// cache's keys, not its objects decoded; a change queued meanwhile is
// delivered in its key's place instead of the replay's copy.
func TestInformer_EncodedReplayDecodesEachObjectAsItIsDelivered(t *testing.T) {
	const n = 5000
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		var (
			mu      sync.Mutex
			updates = map[string][]string{}
			odd     []string
		)
		h := start(t, Options[*corev1.ConfigMap]{Memory: Memory{Encoded: true}}, func(inf *Informer[*corev1.ConfigMap]) {
			add(t, inf, HandlerFuncs[*corev1.ConfigMap]{UpdateFunc: func(old, new *corev1.ConfigMap) {
				<-hold
				mu.Lock()
				defer mu.Unlock()
				updates[new.Name] = append(updates[new.Name], old.ResourceVersion+">"+new.ResourceVersion)
				if old != new && old.ResourceVersion == new.ResourceVersion {
					odd = append(odd, new.Name+": a replay's Old and New differ")
				}
			}}, HandlerOptions{ReplayInterval: time.Minute})
		})
		defer h.stop()
		objs := make([]*corev1.ConfigMap, n)
		for i := range objs {
			objs[i] = cm(fmt.Sprintf("cm-%05d", i), fmt.Sprintf("uid-%05d", i), "1")
			objs[i].Labels = map[string]string{"app": "replay", "shard": fmt.Sprint(i % 16)}
			objs[i].Data = map[string]string{"key": fmt.Sprintf("value-%05d", i)}
		}
		h.src.relist("1", objs...)
		synctest.Wait()
		before := heapAfterGC()

		time.Sleep(time.Minute) // virtual time: the replay starts, its first update waits on hold
		synctest.Wait()
		during := heapAfterGC()
		held := during - before
		t.Logf("heap held while the replay of %d encoded objects waits on the handler: %d bytes (%.0f B an object)", n, held, float64(held)/n)
		// Decoded whole, the replay held every object (each more than 500
		// bytes); key by key, it holds a key (32 bytes) an object.
		if held > 100*n {
			t.Errorf("the replay holds %d bytes (%.0f B an object) while the handler is busy, want the keys only (under 100 B an object)", held, float64(held)/n)
		}

		h.src.send(ev(watcher.Modified, cm("cm-04000", "uid-04000", "2")))
		synctest.Wait()
		close(hold)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(updates) != n {
			t.Errorf("the replay delivered %d objects, want %d", len(updates), n)
		}
		for name, got := range updates {
			want := "1>1"
			if name == "cm-04000" {
				want = "1>2"
			}
			if len(got) != 1 || got[0] != want {
				t.Errorf("%s: updates %v, want [%s]", name, got, want)
			}
		}
		if len(odd) > 0 {
			t.Errorf("%v", odd[:min(3, len(odd))])
		}
	})
}

func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
