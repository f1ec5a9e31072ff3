package notifier_test

import (
	"fmt"

	"github.com/kloop-dev/kloop/internal/notifier"
)

// A kubewatch config file, with the short resource names kubewatch itself
// ignored, and two sinks at once: kubewatch used only the first handler.
func ExampleParseConfig() {
	cfg, err := notifier.ParseConfig([]byte(`
namespace: web
resource:
  po: true
  cm: true
updates:
  ignorestatusonly: true
handler:
  webhook:
    url: http://127.0.0.1:8000/hook
    filter:
      events: [create, delete]
      labelselector: app=shop
  log: {}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Namespace, cfg.Resources)
	for _, s := range cfg.Sinks {
		fmt.Printf("%s %v %q\n", s.Name, s.Filter.Events, s.Filter.LabelSelector)
	}

	_, err = notifier.ParseConfig([]byte("resource: {pods: true, deploy: maybe}\nhandler: {webhook: {url: http://127.0.0.1:8000/, tlsskip: often}}"), nil)
	fmt.Println(err)
	// Output:
	// web [configmap pod]
	// webhook [create delete] "app=shop"
	// log [] ""
	// config: resource.deploy: want true or false, got "maybe"; handler.webhook.tlsskip: want true or false, got "often"
}
