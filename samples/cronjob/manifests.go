package cronjob

import _ "embed"

// CRDYAML is the CronJob CustomResourceDefinition, both versions (v1
// stored), generated from the API types by controller-gen (`make
// generate`). Install it with manifest.InstallCRD; the v2 version needs the
// conversion webhook Setup serves (with kloop.Options.WebhookLocal the App
// points the CRD at it while it runs).
//
//go:embed crd/batch.tutorial.kubebuilder.io_cronjobs.yaml
var CRDYAML []byte
