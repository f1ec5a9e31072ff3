// Package cronjob is the CronJob controller of the kubebuilder book
// (batch.tutorial.kubebuilder.io), written on kloop's builder from the
// book's documented behaviour: for every CronJob it runs a Job at each
// time of spec.schedule, and reports the running ones.
//
// Setup declares it on a kloop.App: a handle on CronJobs (v1, the stored
// version) and on Jobs with an index of Jobs by the CronJob that controls
// them, one controller (For CronJobs, Owns Jobs), and, when the App
// serves webhooks, the CronJob's defaulting (SetDefaults), validation
// (Validator) and v1/v2 conversion (apis/batch/v2).
//
// # What a sync does (the book's order)
//
//  1. Reads the CronJob; kloop.Handle.Finalize puts the finalizer
//     (Finalizer) on first, and on deletion runs the clean-up below.
//  2. Lists its Jobs through the index and sorts them into active,
//     successful and failed (Classify).
//  3. Writes the status: status.active references the active Jobs, and
//     status.lastScheduleTime is the latest scheduled time the Jobs carry
//     in ScheduledTimeAnnotation.
//  4. Deletes the oldest finished Jobs beyond successfulJobsHistoryLimit
//     and failedJobsHistoryLimit, in the background (their pods go after).
//  5. A suspended CronJob stops here.
//  6. Finds the most recent run that was due and has not been run
//     (DueRuns), from the last schedule time (else the creation), no
//     older than startingDeadlineSeconds; more than MaxMissedRuns missed
//     runs is an error, as in the book.
//  7. Applies the concurrency policy while Jobs are active (Decide):
//     Allow starts the run, Forbid skips it, Replace deletes the active
//     Jobs first.
//  8. Creates the run's Job (NewJob): named <cronjob>-<Unix time of the
//     run>, so a run is started once, with the scheduled-time annotation
//     and a controller reference.
//  9. Asks to be synced again when the next run is due.
//
// Time comes from Options.Clock, so tests move a fake clock instead of
// waiting for minutes.
//
// On deletion the clean-up deletes the CronJob's Jobs (their pods are
// garbage-collected after them); the finalizer comes off only once it
// has succeeded, so the CronJob is gone only after its Jobs.
//
// # Differences from the book
//
//   - status.lastScheduleTime never goes back: with the latest run's Job
//     pruned (a history limit of 0), missed runs are still counted from
//     it, not from the creation (which would start that run again).
//   - Jobs are pruned in the order of their scheduled times (the book
//     orders them by start time, which a Job just made has not got yet).
//   - The index is per namespace by the owner's name, and a Job counts
//     only if its controller reference has the CronJob's UID (not one of
//     an earlier CronJob of the same name).
//   - An update is validated as a create (the book's choice too), except
//     that a CronJob already invalid may still be changed (suspended,
//     say) if the update leaves its name and schedule as they are.
//   - Validation warns when startingDeadlineSeconds is unset.
//   - An unparsable schedule or too many missed runs is a terminal error:
//     retrying cannot help until the spec changes.
package cronjob
