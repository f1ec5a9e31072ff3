package controller

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Retry marks err as one to retry with back-off even though the API
// server's answer in it says that the same request will fail again (see
// Reconciler): for a reconcile that expects what it sends to change, such
// as an object built from another that is still being fixed.
// errors.Is(Retry(err), err) is true.
func Retry(err error) error {
	if err == nil {
		return nil
	}
	return &retryError{err: err}
}

type retryError struct{ err error }

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// unretryable reports whether a reconcile's error is not retried: it is a
// TerminalError, or, unless it is marked Retry, it holds an API server's
// answer that the same request cannot succeed however often it is sent:
//   - Invalid (422) or BadRequest (400): the object fails validation;
//   - a denial by an admission webhook or a ValidatingAdmissionPolicy;
//   - a conflict of field ownership on a server-side apply without force
//     (a conflict of resourceVersion is retried: the next read is newer).
//
// A Forbidden that is no admission denial (RBAC) is retried, since rights
// are granted at run time. The key is reconciled again when its object
// changes.
func unretryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrTerminal) {
		return true
	}
	var retry *retryError
	if errors.As(err, &retry) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	s := status.Status()
	switch {
	case s.Reason == metav1.StatusReasonInvalid, s.Reason == metav1.StatusReasonBadRequest:
		return true
	case s.Code >= 400 && admissionDenial(s.Message):
		return true
	case s.Reason == metav1.StatusReasonConflict && s.Details != nil:
		for _, c := range s.Details.Causes {
			if c.Type == metav1.CauseTypeFieldManagerConflict {
				return true
			}
		}
	}
	return false
}

// admissionDenial reports whether an API server's message is an
// admission webhook's or a ValidatingAdmissionPolicy's denial.
func admissionDenial(msg string) bool {
	return strings.HasPrefix(msg, "admission webhook ") && strings.Contains(msg, " denied the request") ||
		strings.Contains(msg, "ValidatingAdmissionPolicy ") && strings.Contains(msg, " denied request")
}
