package kloopfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Host is the address in a Server's Config. Nothing listens there: the
// Config's transport answers every request in memory.
const Host = "http://kloopfake.invalid"

// Options configure NewServer. The zero value serves client-go's built-in
// types.
type Options struct {
	// Scheme has the Go types the server stores and their kinds: it serves
	// every kind of the scheme that has a list kind (Kind + "List") and
	// object metadata, at a resource named like the kind (see Resource).
	// Give it the scheme the App uses. Default: client-go's
	// k8s.io/client-go/kubernetes/scheme.Scheme.
	Scheme *runtime.Scheme
	// Resources overrides what is inferred from the scheme for some kinds:
	// their resource name, scope, status subresource (a CRD's plural name,
	// scope and subresources).
	Resources []Resource
	// Objects are stored before the first request as they are (a copy of
	// each), status, uid and creationTimestamp included, unlike a create
	// through the API, which resets them: known state for a test to start
	// from. Each gets a resourceVersion, a uid and creationTimestamp if it
	// has none, and metadata.generation 1. An object of a kind the server
	// does not serve, or given twice, fails NewServer.
	Objects []runtime.Object
	// Clock gives creationTimestamp and deletionTimestamp. Default: the
	// real clock.
	Clock clock.PassiveClock
}

// Server is an API server in memory: a Kubernetes REST API served by an
// http.RoundTripper from objects held in a map, for unit tests of
// controllers. Its Config is a rest.Config for kloop.New, client.New,
// informers or client-go's clientsets; requests never leave the process.
// See the package documentation for what it does and does not do.
//
// It is safe for concurrent use.
type Server struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	res    *resources
	store  *store

	mu        sync.Mutex
	intercept func(Request) error
	closeCh   chan struct{} // closed by endWatches: the watches open then end
	managers  fieldManagers
}

// Request describes a request to a resource, for Intercept.
type Request struct {
	// Verb is get, list, watch, create, update, patch or delete.
	Verb        string
	Resource    schema.GroupVersionResource
	Subresource string // "" or "status"
	Namespace   string
	Name        string // "" for list, watch and create
	// PatchType is the patch's type, for patch.
	PatchType types.PatchType
}

// NewServer returns a server that holds opts.Objects. It starts no
// goroutines; each watch runs one, until its response body is closed or
// its request's context is done.
func NewServer(opts Options) (*Server, error) {
	if opts.Scheme == nil {
		opts.Scheme = clientgoscheme.Scheme
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	res, err := newResources(opts.Scheme, opts.Resources)
	if err != nil {
		return nil, err
	}
	s := &Server{scheme: opts.Scheme, codecs: serializer.NewCodecFactory(opts.Scheme), res: res, store: newStore(opts.Clock), closeCh: make(chan struct{})}
	if err := s.add(opts.Objects...); err != nil {
		return nil, err
	}
	return s, nil
}

// Config returns a rest.Config whose requests the server answers, without
// client-side rate limiting (QPS is negative).
func (s *Server) Config() *rest.Config {
	return &rest.Config{Host: Host, Transport: roundTripper{s}, QPS: -1}
}

// add stores Options.Objects.
func (s *Server) add(objs ...runtime.Object) error {
	for _, obj := range objs {
		r, err := s.resourceOf(obj)
		if err != nil {
			return err
		}
		cp := obj.DeepCopyObject()
		cp.GetObjectKind().SetGroupVersionKind(r.gvk)
		cp.(metav1.Object).SetResourceVersion("")
		if _, err := s.store.create(r, cp.(metav1.Object).GetNamespace(), cp, true, false); err != nil {
			return fmt.Errorf("kloopfake: Options.Objects: %T: %w", obj, err)
		}
	}
	return nil
}

// resourceVersion is the resourceVersion of the server's latest write.
func (s *Server) resourceVersion() string {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return strconv.FormatUint(s.store.rv, 10)
}

// Intercept makes fn see every request to a resource before it is
// served (discovery aside); when fn returns an error, the request fails
// with it and changes nothing. An *apierrors.StatusError (such as
// apierrors.NewConflict) reaches the client as the API server would send
// it; any other error is an InternalError. It is how a test makes a write
// fail the way a busy cluster does. nil removes the interceptor. fn runs
// on the requesting goroutine and must not call the server.
func (s *Server) Intercept(fn func(Request) error) {
	s.mu.Lock()
	s.intercept = fn
	s.mu.Unlock()
}

// endWatches ends every open watch, as an API server going away does:
// clients watch again, and the server answers them as before.
func (s *Server) endWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.closeCh)
	s.closeCh = make(chan struct{})
}

// closing is closed by the next endWatches.
func (s *Server) closing() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeCh
}

func (s *Server) resourceOf(obj runtime.Object) (*resource, error) {
	if _, ok := obj.(metav1.Object); !ok {
		return nil, fmt.Errorf("kloopfake: %T has no object metadata", obj)
	}
	kinds, _, err := s.scheme.ObjectKinds(obj)
	if err != nil {
		return nil, fmt.Errorf("kloopfake: %w", err)
	}
	for _, k := range kinds {
		if r := s.res.byGVK[k]; r != nil && s.res.byGVR[r.gvr] == r {
			return r, nil
		}
	}
	return nil, fmt.Errorf("kloopfake: the server serves no resource of %T (kinds %v): give it a list kind in the scheme, or a Resource in Options", obj, kinds)
}

func namespaceOf(r *resource, ns string) string {
	if !r.namespaced {
		return ""
	}
	return ns
}

// roundTripper is the transport of Config: it answers each request as the
// API server would, from the server's memory.
type roundTripper struct{ s *Server }

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.s
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	resp, err := s.serve(req, body)
	if err != nil {
		resp = s.errorResponse(req, err)
	}
	return resp, nil
}

// path is a parsed resource path.
type path struct {
	r         *resource
	namespace string
	name      string
	sub       string
}

func (s *Server) serve(req *http.Request, body []byte) (*http.Response, error) {
	p := strings.Trim(req.URL.Path, "/")
	parts := strings.Split(p, "/")
	var gv schema.GroupVersion
	switch {
	case p == "api":
		return s.jsonResponse(req, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
	case p == "apis":
		return s.jsonResponse(req, http.StatusOK, s.groupList())
	case parts[0] == "api" && len(parts) >= 2:
		gv, parts = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case parts[0] == "apis" && len(parts) >= 3:
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return nil, apierrors.NewNotFound(schema.GroupResource{}, "/"+p)
	}
	if _, ok := s.res.byGV[gv]; !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, "/"+p)
	}
	if len(parts) == 0 {
		if req.Method != http.MethodGet {
			return nil, apierrors.NewMethodNotSupported(schema.GroupResource{}, req.Method)
		}
		return s.jsonResponse(req, http.StatusOK, s.res.discovery(gv))
	}
	var rp path
	if len(parts) >= 3 && parts[0] == "namespaces" {
		if r := s.res.byGVR[gv.WithResource(parts[2])]; r != nil && r.namespaced {
			rp.r, rp.namespace, parts = r, parts[1], parts[3:]
		}
	}
	if rp.r == nil {
		rp.r, parts = s.res.byGVR[gv.WithResource(parts[0])], parts[1:]
	}
	if rp.r == nil || len(parts) > 2 {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, "/"+p)
	}
	if len(parts) > 0 {
		rp.name = parts[0]
	}
	if len(parts) > 1 {
		rp.sub = parts[1]
	}
	return s.serveResource(req, rp, body)
}

func (s *Server) serveResource(req *http.Request, p path, body []byte) (*http.Response, error) {
	r := p.r
	q := req.URL.Query()
	dryRun := len(q["dryRun"]) > 0
	ir := Request{Resource: r.gvr, Subresource: p.sub, Namespace: p.namespace, Name: p.name}
	var opts metav1.ListOptions
	switch {
	case req.Method == http.MethodGet && p.name == "":
		if err := metav1.Convert_url_Values_To_v1_ListOptions(&q, &opts, nil); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		ir.Verb = "list"
		if opts.Watch {
			ir.Verb = "watch"
		}
	case req.Method == http.MethodGet:
		ir.Verb = "get"
	case req.Method == http.MethodPost && p.name == "":
		ir.Verb = "create"
	case req.Method == http.MethodPut && p.name != "":
		ir.Verb = "update"
	case req.Method == http.MethodPatch && p.name != "":
		ir.Verb, ir.PatchType = "patch", types.PatchType(mediaType(req.Header.Get("Content-Type")))
	case req.Method == http.MethodDelete && p.name != "":
		ir.Verb = "delete"
	default:
		return nil, apierrors.NewMethodNotSupported(r.gvr.GroupResource(), req.Method+" "+req.URL.Path)
	}
	if p.sub != "" && (ir.Verb != "get" && ir.Verb != "update" && ir.Verb != "patch" || p.sub != "status" || !r.status) {
		return nil, apierrors.NewNotFound(r.gvr.GroupResource(), p.name+"/"+p.sub)
	}
	s.mu.Lock()
	intercept := s.intercept
	s.mu.Unlock()
	if intercept != nil {
		if err := intercept(ir); err != nil {
			return nil, err
		}
	}
	info, err := s.accept(req)
	if err != nil {
		return nil, err
	}
	var out runtime.Object
	switch ir.Verb {
	case "get":
		out, err = s.store.get(r, namespaceOf(r, p.namespace), p.name)
	case "list":
		sel, err := newSelector(opts.LabelSelector, opts.FieldSelector)
		if err != nil {
			return nil, err
		}
		objs, rv := s.store.list(r, namespaceOf(r, p.namespace), sel)
		if out, err = s.newList(r, objs, rv); err != nil {
			return nil, err
		}
	case "watch":
		return s.watch(req, r, namespaceOf(r, p.namespace), opts, info)
	case "create":
		var obj runtime.Object
		if obj, err = s.decode(r, req, body); err == nil {
			out, err = s.store.create(r, p.namespace, obj, false, dryRun)
		}
	case "update":
		var obj runtime.Object
		if obj, err = s.decode(r, req, body); err == nil {
			out, err = s.store.update(r, namespaceOf(r, p.namespace), p.name, p.sub, obj, dryRun)
		}
	case "patch":
		if ir.PatchType == types.ApplyPatchType {
			out, err = s.apply(r, namespaceOf(r, p.namespace), p.name, p.sub, body, q.Get("fieldManager"), q.Get("force") == "true", dryRun)
			break
		}
		s.store.mu.Lock()
		out, err = s.store.updateLocked(r, namespaceOf(r, p.namespace), p.name, p.sub, func(cur runtime.Object) (runtime.Object, error) {
			return s.patch(r, cur, p.name, ir.PatchType, body)
		}, dryRun)
		s.store.mu.Unlock()
	case "delete":
		return s.delete(req, r, p, body, info)
	}
	if err != nil {
		return nil, err
	}
	code := http.StatusOK
	if ir.Verb == "create" {
		code = http.StatusCreated
	}
	return s.objectResponse(req, code, r, out, info)
}

func (s *Server) delete(req *http.Request, r *resource, p path, body []byte, info runtime.SerializerInfo) (*http.Response, error) {
	var opts metav1.DeleteOptions
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &opts); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("DeleteOptions: %v", err))
		}
	}
	if q := req.URL.Query(); len(q["dryRun"]) > 0 {
		opts.DryRun = q["dryRun"]
	}
	d, err := s.store.delete(r, namespaceOf(r, p.namespace), p.name, &opts)
	if err != nil {
		return nil, err
	}
	if d.gone && r.builtin {
		// Built-in resources answer a completed delete with a Status.
		a := mustAccessor(d.obj)
		return s.jsonResponse(req, http.StatusOK, &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusSuccess,
			Details:  &metav1.StatusDetails{Name: p.name, Group: r.gvk.Group, Kind: r.gvr.Resource, UID: a.GetUID()},
		})
	}
	return s.objectResponse(req, http.StatusOK, r, d.obj, info)
}

// decode reads a create's or update's body into the resource's Go type.
func (s *Server) decode(r *resource, req *http.Request, body []byte) (runtime.Object, error) {
	into, err := s.scheme.New(r.gvk)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj, gvk, err := s.codecs.UniversalDeserializer().Decode(body, &r.gvk, into)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decode the %s body (%s): %v", r.gvk.Kind, req.Header.Get("Content-Type"), err))
	}
	if reflect.TypeOf(obj) != reflect.TypeOf(into) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s; %s serves %s (the in-memory API server converts no versions)", gvk, r.gvr, r.gvk))
	}
	obj.GetObjectKind().SetGroupVersionKind(r.gvk)
	return obj, nil
}

// newList makes r's list type holding objs at resourceVersion rv.
func (s *Server) newList(r *resource, objs []runtime.Object, rv uint64) (runtime.Object, error) {
	listGVK := r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List")
	list, err := s.scheme.New(listGVK)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	list.GetObjectKind().SetGroupVersionKind(listGVK)
	items := reflect.ValueOf(list).Elem().FieldByName("Items")
	for _, obj := range objs {
		items.Set(reflect.Append(items, reflect.ValueOf(obj).Elem()))
	}
	list.(metav1.ListInterface).SetResourceVersion(strconv.FormatUint(rv, 10))
	return list, nil
}

// accept chooses the serializer of the response from req's Accept header:
// JSON, YAML or protobuf; JSON when none is asked for.
func (s *Server) accept(req *http.Request) (runtime.SerializerInfo, error) {
	header := req.Header.Get("Accept")
	if header == "" {
		header = runtime.ContentTypeJSON
	}
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if params["as"] != "" {
			continue // a Table or PartialObjectMetadata: not served
		}
		if mt == "*/*" || mt == "application/*" {
			mt = runtime.ContentTypeJSON
		}
		if info, ok := runtime.SerializerInfoForMediaType(s.codecs.SupportedMediaTypes(), mt); ok {
			return info, nil
		}
	}
	return runtime.SerializerInfo{}, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
		Message: fmt.Sprintf("the in-memory API server serves objects as JSON, YAML or protobuf only (no Table, no PartialObjectMetadata); Accept was %q", header),
	}}
}

func mediaType(header string) string {
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return header
	}
	return mt
}

func (s *Server) objectResponse(req *http.Request, code int, r *resource, obj runtime.Object, info runtime.SerializerInfo) (*http.Response, error) {
	if _, isList := obj.(metav1.ListInterface); !isList { // a list has its kind from newList
		obj.GetObjectKind().SetGroupVersionKind(r.gvk)
	}
	var buf bytes.Buffer
	if err := info.Serializer.Encode(obj, &buf); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return response(req, code, info.MediaType, buf.Bytes()), nil
}

func (s *Server) jsonResponse(req *http.Request, code int, obj any) (*http.Response, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return response(req, code, runtime.ContentTypeJSON, b), nil
}

func (s *Server) errorResponse(req *http.Request, err error) *http.Response {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		se = apierrors.NewInternalError(err)
	}
	st := se.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	st.Status = metav1.StatusFailure
	b, _ := json.Marshal(st)
	return response(req, int(st.Code), runtime.ContentTypeJSON, b)
}

func response(req *http.Request, code int, contentType string, body []byte) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {contentType}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

func (s *Server) groupList() *metav1.APIGroupList {
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	byGroup := map[string]int{}
	for _, gv := range s.res.groups() {
		if gv.Group == "" {
			continue
		}
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		i, ok := byGroup[gv.Group]
		if !ok {
			i = len(list.Groups)
			byGroup[gv.Group] = i
			list.Groups = append(list.Groups, metav1.APIGroup{Name: gv.Group, PreferredVersion: v})
		}
		list.Groups[i].Versions = append(list.Groups[i].Versions, v)
	}
	return list
}
