package controller_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kloop-dev/kloop/controller"
)

func TestUnretryable_WhatRetryingCannotFixIsTerminalUnlessMarkedRetry(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "Bad_Name!",
		field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), "Bad_Name!", "a lowercase RFC 1123 subdomain")})
	webhook := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
		Reason: metav1.StatusReasonForbidden, Message: `admission webhook "vfoo.example.com" denied the request: replicas must be odd`}}
	policy := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
		Reason: metav1.StatusReasonInvalid, Message: `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no`}}
	policyForbidden := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
		Reason: metav1.StatusReasonForbidden, Message: `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no`}}
	ownership := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusConflict,
		Reason: metav1.StatusReasonConflict, Message: `Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl"`, Field: ".spec.replicas"}}}}}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("connection refused"), false},
		{"TerminalError", controller.TerminalError(errors.New("bad spec")), true},
		{"Invalid", invalid, true},
		{"Invalid, wrapped", fmt.Errorf("create deployment: %w", invalid), true},
		{"Invalid marked Retry", controller.Retry(invalid), false},
		{"Invalid marked Retry, then wrapped", fmt.Errorf("x: %w", controller.Retry(invalid)), false},
		{"TerminalError of a Retry", controller.TerminalError(controller.Retry(invalid)), true},
		{"BadRequest", apierrors.NewBadRequest("not a patch"), true},
		{"webhook denial", webhook, true},
		{"ValidatingAdmissionPolicy denial (Invalid)", policy, true},
		{"ValidatingAdmissionPolicy denial (Forbidden)", policyForbidden, true},
		{"RBAC Forbidden", apierrors.NewForbidden(gr, "d", errors.New(`User "x" cannot patch resource "deployments"`)), false},
		{"field-ownership conflict", ownership, true},
		{"resourceVersion conflict", apierrors.NewConflict(gr, "d", errors.New("the object has been modified")), false},
		{"NotFound", apierrors.NewNotFound(gr, "d"), false},
		{"server timeout", apierrors.NewServerTimeout(gr, "create", 1), false},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), false},
	} {
		if got := controller.Unretryable(tc.err); got != tc.want {
			t.Errorf("%s: unretryable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if err := controller.Retry(nil); err != nil {
		t.Errorf("Retry(nil) = %v, want nil", err)
	}
	if !errors.Is(controller.Retry(invalid), invalid) {
		t.Error("errors.Is(Retry(err), err) = false, want true")
	}
}
