package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kloop-dev/kloop/webhook"
)

func TestPaths_AreControllerRuntimes(t *testing.T) {
	for _, tc := range []struct {
		gvk              schema.GroupVersionKind
		mutate, validate string
	}{
		{corev1.SchemeGroupVersion.WithKind("Pod"), "/mutate--v1-pod", "/validate--v1-pod"},
		{schema.GroupVersionKind{Group: "batch.tutorial.kubebuilder.io", Version: "v1", Kind: "CronJob"},
			"/mutate-batch-tutorial-kubebuilder-io-v1-cronjob", "/validate-batch-tutorial-kubebuilder-io-v1-cronjob"},
	} {
		if got := webhook.MutatePath(tc.gvk); got != tc.mutate {
			t.Errorf("MutatePath(%v) = %q, want %q", tc.gvk, got, tc.mutate)
		}
		if got := webhook.ValidatePath(tc.gvk); got != tc.validate {
			t.Errorf("ValidatePath(%v) = %q, want %q", tc.gvk, got, tc.validate)
		}
	}
}

func post(h http.Handler, contentType, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlers_AnswerABodyThatIsNoReviewWith400SayingWhy(t *testing.T) {
	mut := webhook.Mutating(clientgoscheme.Scheme, func(context.Context, *corev1.ConfigMap) error { return nil }, nil)
	conv := webhook.Conversion(clientgoscheme.Scheme, nil)
	for _, tc := range []struct {
		name        string
		h           http.Handler
		contentType string
		body        string
		want        string
	}{
		{"not JSON", mut, "application/json", "{", "not an AdmissionReview"},
		{"no content type", mut, "", `{}`, `content type "": want application/json`},
		{"empty body", mut, "application/json", "", "the body is empty"},
		{"v1beta1 review", mut, "application/json", `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}`, "want an admission.k8s.io/v1 AdmissionReview"},
		{"no request", mut, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "has no request"},
		{"a conversion review to an admission webhook", mut, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{}}`, "want an admission.k8s.io/v1 AdmissionReview"},
		{"conversion: not JSON", conv, "application/json", "[", "not a ConversionReview"},
		{"conversion: no request", conv, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, "has no request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := post(tc.h, tc.contentType, tc.body)
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tc.want) {
				t.Errorf("got %d %q, want 400 saying %q", w.Code, w.Body.String(), tc.want)
			}
		})
	}
}

func review(t *testing.T, h http.Handler, req admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	b, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: admissionReviewType, Request: &req})
	if err != nil {
		t.Fatal(err)
	}
	w := post(h, "application/json", string(b))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != http.StatusOK || out.Response == nil {
		t.Fatalf("response %d %q: %v", w.Code, w.Body.String(), err)
	}
	if out.Response.UID != req.UID {
		t.Errorf("response uid %q, want the request's %q", out.Response.UID, req.UID)
	}
	return out.Response
}

var admissionReviewType = admissionv1.AdmissionReview{}.TypeMeta

func init() {
	admissionReviewType.APIVersion, admissionReviewType.Kind = "admission.k8s.io/v1", "AdmissionReview"
}

// The patch adds what the defaulter set and leaves alone what the Go type
// does not know (a field of a newer API version).
func TestMutating_PatchesWhatTheDefaulterSetAndKeepsUnknownFields(t *testing.T) {
	h := webhook.Mutating(clientgoscheme.Scheme, func(ctx context.Context, cm *corev1.ConfigMap) error {
		if r, ok := webhook.RequestFrom(ctx); !ok || r.Name != "x" {
			t.Errorf("RequestFrom = %v, %v; want the request for x", r, ok)
		}
		cm.Data["b"] = "2"
		return nil
	}, nil)
	raw := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","futureField":"kept"},"data":{"a":"1"}}`
	resp := review(t, h, admissionv1.AdmissionRequest{UID: "u1", Name: "x", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(raw)}})
	if !resp.Allowed || resp.PatchType == nil {
		t.Fatalf("response %+v, want allowed with a patch", resp)
	}
	var ops []jsonpatch.Operation
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	added := false
	for _, op := range ops {
		if op.Operation == "remove" {
			t.Errorf("patch removes %s", op.Path)
		}
		if op.Path == "/data/b" && op.Value == "2" {
			added = true
		}
	}
	if !added {
		t.Errorf("patch %s does not add /data/b", resp.Patch)
	}
}

// A panic in a validator or a conversion is a refusal, not a crash.
func TestHandlers_TurnAPanicIntoARefusal(t *testing.T) {
	h := webhook.Validating[*corev1.ConfigMap](clientgoscheme.Scheme, panicky{}, nil)
	raw := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`
	resp := review(t, h, admissionv1.AdmissionRequest{UID: "u2", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(raw)}})
	if resp.Allowed || resp.Result == nil || resp.Result.Code != 500 || !strings.Contains(resp.Result.Message, "boom") {
		t.Errorf("response %+v, want a 500 refusal naming the panic", resp)
	}
}

type panicky struct{}

func (panicky) ValidateCreate(context.Context, *corev1.ConfigMap) (webhook.Warnings, error) {
	panic("boom")
}
func (panicky) ValidateUpdate(context.Context, *corev1.ConfigMap, *corev1.ConfigMap) (webhook.Warnings, error) {
	return nil, nil
}
func (panicky) ValidateDelete(context.Context, *corev1.ConfigMap) (webhook.Warnings, error) {
	return nil, nil
}

func TestConversion_FailsAKindWithoutAHub(t *testing.T) {
	h := webhook.Conversion(clientgoscheme.Scheme, nil)
	body, _ := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: apiextensionsv1.ConversionReview{}.TypeMeta,
		Request: &apiextensionsv1.ConversionRequest{UID: "u3", DesiredAPIVersion: "apps/v1beta2", Objects: []runtime.RawExtension{
			{Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}`)},
		}},
	})
	body = []byte(strings.Replace(string(body), "{", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",`, 1))
	w := post(h, "application/json", string(body))
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("response %d %q: %v", w.Code, w.Body.String(), err)
	}
	if r := out.Response.Result; r.Status != "Failure" || !strings.Contains(r.Message, "no Hub version") || out.Response.UID != "u3" {
		t.Errorf("result %+v (uid %q), want a Failure saying the kind has no Hub version", r, out.Response.UID)
	}
}
