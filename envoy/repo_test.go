package envoy

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// envoyBootstraps lists the YAML files under dirs whose top level has a
// static_resources key; other YAML (the modelgate config, Kubernetes
// manifests) is not an Envoy bootstrap.
func envoyBootstraps(t *testing.T, dirs ...string) []string {
	t.Helper()
	var found []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var top map[string]any
			if yaml.Unmarshal(data, &top) == nil && top["static_resources"] != nil {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walking %s: %v", dir, err)
		}
	}
	return found
}

// Every Envoy bootstrap in the repository loads: the generated
// envoy/envoy.yaml, hand-written samples and whatever deploy/ holds.
func TestRepositoryEnvoyYAML(t *testing.T) {
	t.Parallel()
	paths := envoyBootstraps(t, ".", filepath.Join("..", "deploy"))
	if len(paths) == 0 {
		t.Fatal("found no Envoy bootstrap; want at least testdata/extproc-sample.yaml")
	}
	for _, path := range paths {
		t.Run(filepath.ToSlash(path), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := LoadYAML(data); err != nil {
				t.Errorf("LoadYAML(%s):\n%v", path, err)
			}
		})
	}
}

func TestEnvoyBootstrapsSkipsOtherYAML(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"bootstrap.yaml": "static_resources: {}\n",
		"config.yml":     "backends: []\n",
		"list.yaml":      "- static_resources\n",
		"notes.txt":      "static_resources: {}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := envoyBootstraps(t, dir)
	if len(got) != 1 || filepath.Base(got[0]) != "bootstrap.yaml" {
		t.Errorf("envoyBootstraps = %v, want only bootstrap.yaml", got)
	}
}
