package kloopfake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// watch answers a watch request: a response whose body streams the events
// of r in ns that opts select, written by a goroutine that ends when the
// body is closed, the request's context is done or the server is closed.
//
// Without a resourceVersion (or with "0"), or with sendInitialEvents, the
// stream starts with an ADDED event per object; with sendInitialEvents
// these end with the initial-events-end bookmark. Otherwise it starts
// after the given resourceVersion (the server keeps every change, so none
// is too old).
func (s *Server) watch(req *http.Request, r *resource, ns string, opts metav1.ListOptions, info runtime.SerializerInfo) (*http.Response, error) {
	sel, err := newSelector(opts.LabelSelector, opts.FieldSelector)
	if err != nil {
		return nil, err
	}
	if info.StreamSerializer == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot stream a watch as %s", info.MediaType))
	}
	var from uint64
	initial := opts.ResourceVersion == "" || opts.ResourceVersion == "0" || opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if !initial {
		if from, err = strconv.ParseUint(opts.ResourceVersion, 10, 64); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q is not an integer", opts.ResourceVersion))
		}
	}
	pr, pw := io.Pipe()
	body := &watchBody{PipeReader: pr, done: make(chan struct{})}
	w := &watchStream{
		s: s, r: r, ns: ns, sel: sel, info: info, pw: pw,
		frames:    info.StreamSerializer.Framer.NewFrameWriter(pw),
		bookmarks: opts.AllowWatchBookmarks,
	}
	go w.run(req.Context(), body.done, s.closing(), initial, opts.SendInitialEvents != nil && *opts.SendInitialEvents, from)
	resp := response(req, http.StatusOK, info.MediaType, nil)
	resp.Body, resp.ContentLength = body, -1
	return resp, nil
}

// watchBody is a watch response's body: closing it stops the stream.
type watchBody struct {
	*io.PipeReader
	once sync.Once
	done chan struct{}
}

func (b *watchBody) Close() error {
	b.once.Do(func() { close(b.done) })
	return b.PipeReader.Close()
}

type watchStream struct {
	s         *Server
	r         *resource
	ns        string
	sel       selector
	info      runtime.SerializerInfo
	pw        *io.PipeWriter
	frames    io.Writer
	bookmarks bool
}

func (w *watchStream) run(ctx context.Context, done, closing <-chan struct{}, initial, endBookmark bool, from uint64) {
	err := w.stream(ctx, done, closing, initial, endBookmark, from)
	w.pw.CloseWithError(err) // nil: the client reads EOF, the watch ended
}

func (w *watchStream) stream(ctx context.Context, done, closing <-chan struct{}, initial, endBookmark bool, cursor uint64) error {
	seen := cursor // the latest resourceVersion the client has been sent
	if initial {
		objs, rv := w.s.store.snapshot(w.r.gvr)
		for _, obj := range objs {
			if w.sel.matches(w.ns, obj) {
				if err := w.send(watch.Added, obj); err != nil {
					return err
				}
			}
		}
		cursor = rv
		if endBookmark {
			if err := w.bookmark(rv, true); err != nil {
				return err
			}
			seen = rv
		}
	}
	for {
		evs, now, changed := w.s.store.since(w.r.gvr, cursor)
		for _, ev := range evs {
			typ, obj := w.translate(ev)
			if typ == "" {
				continue
			}
			if err := w.send(typ, obj); err != nil {
				return err
			}
			seen = ev.rv
		}
		if seen < now && w.bookmarks {
			// Progress the client cannot see otherwise (writes of other
			// resources, or outside its selectors, or a snapshot newer than
			// its objects), as the API server's periodic bookmarks tell.
			if err := w.bookmark(now, false); err != nil {
				return err
			}
			seen = now
		}
		cursor = now
		select {
		case <-changed:
		case <-done:
			return nil
		case <-closing:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// translate is what a watcher with the stream's selectors sees of ev: an
// object that comes into them is ADDED, one that leaves them DELETED; ""
// for nothing.
func (w *watchStream) translate(ev event) (watch.EventType, runtime.Object) {
	was := ev.old != nil && w.sel.matches(w.ns, ev.old)
	is := w.sel.matches(w.ns, ev.obj)
	switch {
	case ev.typ == watch.Deleted && (was || is):
		return watch.Deleted, ev.obj
	case ev.typ == watch.Deleted:
		return "", nil
	case was && is:
		return watch.Modified, ev.obj
	case is:
		return watch.Added, ev.obj
	case was:
		return watch.Deleted, ev.obj
	}
	return "", nil
}

// send writes one event. obj is the store's: encoding only reads it.
func (w *watchStream) send(typ watch.EventType, obj runtime.Object) error {
	var raw bytes.Buffer
	if err := w.info.Serializer.Encode(obj, &raw); err != nil {
		return err
	}
	return w.info.StreamSerializer.Serializer.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw.Bytes()}}, w.frames)
}

// bookmark writes a BOOKMARK at rv; end marks the end of the initial
// events.
func (w *watchStream) bookmark(rv uint64, end bool) error {
	obj, err := w.s.scheme.New(w.r.gvk)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(w.r.gvk)
	a := mustAccessor(obj)
	a.SetResourceVersion(strconv.FormatUint(rv, 10))
	if end {
		a.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return w.send(watch.Bookmark, obj)
}
