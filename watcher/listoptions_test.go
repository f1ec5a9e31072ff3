package watcher_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop/watcher"
)

// With a ListOptions hook (here one that adds a shard selector) the
// reflector lists with paginated LISTs (whose metadata tells whether the
// server applied the selector), sends the hook's current answer with every
// call, and reports the metadata of the last LIST.
func TestReflector_ListOptions_AreAddedToEveryCallAndListMetaKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sel atomic.Value
		sel.Store("shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')")
		addSelector := func(o *metav1.ListOptions) { o.ShardSelector = sel.Load().(string) }
		x := start(t, watcher.Options{ListOptions: addSelector})
		c := x.call()
		if c.Method != "List" || c.Options.ShardSelector != sel.Load() {
			t.Fatalf("first call %s with shardSelector %q; want a LIST with the selector", c, c.Options.ShardSelector)
		}
		if x.r.ListMeta().ShardInfo != nil {
			t.Fatal("shardInfo before any list")
		}
		x.lw.PushList(watcher.ListPage[cm]{Items: []cm{obj("a", "3")}, ResourceVersion: "10", ListMeta: metav1.ListMeta{ResourceVersion: "10", ShardInfo: &metav1.ShardInfo{Selector: sel.Load().(string)}}}, nil)
		c = x.call()
		if c.Method != "Watch" || c.Options.ShardSelector != sel.Load() {
			t.Fatalf("second call %s with shardSelector %q; want a WATCH with the selector", c, c.Options.ShardSelector)
		}
		x.expectEvents("RelistStart", "RelistItem a@3", "RelistDone @10")
		if si := x.r.ListMeta().ShardInfo; si == nil || si.Selector != sel.Load() {
			t.Fatalf("shardInfo = %+v after a list that echoed the selector", si)
		}

		// The selector widens; the watch ends; the next call carries it.
		sel.Store("")
		w := x.lw.PushWatch()
		w.Stop()
		c = x.call()
		if c.Method != "Watch" || c.Options.ShardSelector != "" {
			t.Fatalf("after the watch closed: %s with shardSelector %q", c, c.Options.ShardSelector)
		}

		// A server that ignores the selector answers without shardInfo.
		x.stop()
		sel.Store("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')")
		y := start(t, watcher.Options{ListOptions: addSelector})
		y.call()
		y.lw.PushList(watcher.ListPage[cm]{Items: []cm{obj("a", "3")}, ResourceVersion: "10"}, nil)
		y.call()
		if si := y.r.ListMeta().ShardInfo; si != nil {
			t.Fatalf("shardInfo = %+v after a list without one", si)
		}
	})
}
