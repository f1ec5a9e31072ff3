package cronjob_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	batch "github.com/kloop-dev/kloop/samples/cronjob/apis/batch/v1"
	"github.com/kloop-dev/kloop/webhook"
)

// webhookManifests is what controller-gen makes from the
// +kubebuilder:webhook markers in admission.go (make generate).
const webhookManifests = "../../deploy/cronjob-controller/webhook/manifests.yaml"

// The generated webhook configurations call the paths Setup serves the
// webhooks at: a marker with a misspelt path would make the API server
// call a path that answers 404, failing every CronJob write.
func TestWebhookManifests_PathsAreWhereSetupServesTheWebhooks(t *testing.T) {
	data, err := os.ReadFile(webhookManifests)
	if err != nil {
		t.Fatal(err)
	}
	var mutating, validating []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc struct {
			Kind     string                                      `json:"kind"`
			Webhooks []admissionregistrationv1.ValidatingWebhook `json:"webhooks"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", webhookManifests, err)
		}
		for _, w := range doc.Webhooks {
			if w.ClientConfig.Service == nil || w.ClientConfig.Service.Path == nil {
				t.Errorf("%s webhook %s: clientConfig %+v, want a Service and a path", doc.Kind, w.Name, w.ClientConfig)
				continue
			}
			switch doc.Kind {
			case "MutatingWebhookConfiguration":
				mutating = append(mutating, *w.ClientConfig.Service.Path)
			case "ValidatingWebhookConfiguration":
				validating = append(validating, *w.ClientConfig.Service.Path)
			}
		}
	}
	if want := webhook.MutatePath(batch.Kind); len(mutating) != 1 || mutating[0] != want {
		t.Errorf("mutating webhook paths %q, want [%s] (webhook.MutatePath of the v1 CronJob)", mutating, want)
	}
	if want := webhook.ValidatePath(batch.Kind); len(validating) != 1 || validating[0] != want {
		t.Errorf("validating webhook paths %q, want [%s] (webhook.ValidatePath of the v1 CronJob)", validating, want)
	}
}
