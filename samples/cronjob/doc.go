// Package cronjob is the CronJob controller of the kubebuilder book, done
// the kloop way.
package cronjob
