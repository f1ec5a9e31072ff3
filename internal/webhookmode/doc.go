// Package webhookmode holds the App's two ways of getting its webhooks a
// certificate the API server trusts without cert-manager: Local, for a
// program outside the cluster (its own CA, URL-based configurations while
// it runs), and SelfSigned, for one behind a Service (a CA kept in a
// Secret and set as the caBundle). The kloop package's Options choose one;
// package webhook documents both.
package webhookmode
