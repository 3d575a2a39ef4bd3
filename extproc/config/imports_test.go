package config_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The config file's package is a model both consumers are wired from by
// cmd/modelgate: it depends on neither the ext_proc server nor the Envoy
// generator, only on the routing table they share (envoy/routing), which
// depends on nothing of the module.
func TestConfigImportsNeitherConsumer(t *testing.T) {
	for pkg, banned := range map[string]func(dep string) bool{
		".": func(dep string) bool {
			return dep == "modelgate/extproc" || dep == "modelgate/envoy" ||
				strings.HasPrefix(dep, "modelgate/envoy/") && dep != "modelgate/envoy/routing"
		},
		"../../envoy/routing": func(dep string) bool { return dep == "modelgate" || strings.HasPrefix(dep, "modelgate/") },
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 3 {
			t.Fatalf("go list %s found only %v", pkg, deps)
		}
		self := deps[len(deps)-1] // -deps lists the package itself last
		for _, dep := range deps[:len(deps)-1] {
			if banned(dep) {
				t.Errorf("%s depends on %s", self, dep)
			}
		}
	}
}
