package cronjob

import (
	"context"

	"github.com/robfig/cron/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
	"github.com/kloop-dev/kloop/webhook"
)

// The book's defaults.
const (
	DefaultSuccessfulJobsHistoryLimit int32 = 3
	DefaultFailedJobsHistoryLimit     int32 = 1
)

// MaxNameLength is the longest CronJob name: a Job's name is the CronJob's
// and "-" and a Unix time (11 characters), within the 63 of a label value
// (the Job controller labels its pods with the Job's name).
const MaxNameLength = 52

// SetDefaults fills in what cj leaves unset, as the book does:
// concurrencyPolicy Allow, suspend false, successfulJobsHistoryLimit 3,
// failedJobsHistoryLimit 1.
func SetDefaults(cj *batch.CronJob) {
	s := &cj.Spec
	if s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = batch.AllowConcurrent
	}
	if s.Suspend == nil {
		s.Suspend = ptr.To(false)
	}
	if s.SuccessfulJobsHistoryLimit == nil {
		s.SuccessfulJobsHistoryLimit = ptr.To(DefaultSuccessfulJobsHistoryLimit)
	}
	if s.FailedJobsHistoryLimit == nil {
		s.FailedJobsHistoryLimit = ptr.To(DefaultFailedJobsHistoryLimit)
	}
}

// WarningNoStartingDeadline is the warning for a CronJob without
// spec.startingDeadlineSeconds.
const WarningNoStartingDeadline = "spec.startingDeadlineSeconds is unset: a run missed while the controller was away starts however late it is; set it to bound how late a run may start"

// Validate checks what the CRD's schema cannot: the name leaves room for
// the Jobs' suffix, and spec.schedule parses as a standard cron schedule
// (five fields, or a descriptor such as @hourly). It returns an Invalid
// error naming each bad field, and warnings for what is allowed but
// likely unmeant.
func Validate(cj *batch.CronJob) (warnings []string, err error) {
	var errs field.ErrorList
	if len(cj.Name) > MaxNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), cj.Name,
			"must be no more than 52 characters, so that the names of its Jobs (the CronJob's name and a Unix time) fit in a label value"))
	}
	if _, perr := cron.ParseStandard(cj.Spec.Schedule); perr != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "schedule"), cj.Spec.Schedule,
			"not a cron schedule ("+perr.Error()+"): give five fields, minute hour day-of-month month day-of-week, such as \"*/5 * * * *\", or a descriptor such as \"@hourly\""))
	}
	if cj.Spec.StartingDeadlineSeconds == nil {
		warnings = append(warnings, WarningNoStartingDeadline)
	}
	if len(errs) > 0 {
		return warnings, apierrors.NewInvalid(batch.Kind.GroupKind(), cj.Name, errs)
	}
	return warnings, nil
}

// ValidateUpdateOf checks an update from old to cj: cj must be valid as a
// new CronJob would be (so a change that makes the schedule unparsable is
// refused and the stored CronJob stays as it was). A CronJob stored before
// the validator existed may be invalid already; an update that leaves
// its schedule and name as they are is let through, so it can still be
// suspended or deleted.
func ValidateUpdateOf(old, cj *batch.CronJob) (warnings []string, err error) {
	warnings, err = Validate(cj)
	if err != nil && old.Spec.Schedule == cj.Spec.Schedule && old.Name == cj.Name {
		if _, oerr := Validate(old); oerr != nil {
			return warnings, nil
		}
	}
	return warnings, err
}

// The webhooks' configurations, generated into deploy/cronjob-controller/
// webhook (make generate). Their paths are webhook.MutatePath and
// ValidatePath of the v1 CronJob, where Setup serves them (a test checks).
// A delete is always allowed, so the validating webhook is not called for
// one.
//
// +kubebuilder:webhook:path=/mutate-batch-tutorial-kubebuilder-io-v1-cronjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=batch.tutorial.kubebuilder.io,resources=cronjobs,verbs=create;update,versions=v1,name=mcronjob-v1.kb.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-batch-tutorial-kubebuilder-io-v1-cronjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=batch.tutorial.kubebuilder.io,resources=cronjobs,verbs=create;update,versions=v1,name=vcronjob-v1.kb.io,admissionReviewVersions=v1

// Default is the defaulting webhook: SetDefaults.
func Default(_ context.Context, cj *batch.CronJob) error {
	SetDefaults(cj)
	return nil
}

// Validator is the validating webhook: Validate on create,
// ValidateUpdateOf on update; a delete is always allowed.
type Validator struct{}

// ValidateCreate validates a new CronJob.
func (Validator) ValidateCreate(_ context.Context, cj *batch.CronJob) (webhook.Warnings, error) {
	return Validate(cj)
}

// ValidateUpdate validates an update from old to cj.
func (Validator) ValidateUpdate(_ context.Context, old, cj *batch.CronJob) (webhook.Warnings, error) {
	return ValidateUpdateOf(old, cj)
}

// ValidateDelete allows every delete.
func (Validator) ValidateDelete(context.Context, *batch.CronJob) (webhook.Warnings, error) {
	return nil, nil
}
