package envoytest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"modelgate/envoy/envoytest"
)

// The workflow that runs the real-Envoy leg is a GitHub Actions workflow
// (on, jobs, each with runs-on and steps), runs the Envoy of the image
// docker-compose.yml pins, digest and all, and hands it to the tests.
func TestWorkflow(t *testing.T) {
	root := filepath.Join("..", "..")
	data, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "envoy.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf map[string]any
	if err := yaml.UnmarshalStrict(data, &wf); err != nil {
		t.Fatalf("envoy.yml: %v", err)
	}
	// sigs.k8s.io/yaml reads YAML 1.1, where a bare on is the boolean
	// true; GitHub reads the key on.
	on, ok := wf["on"]
	if !ok {
		on = wf["true"]
	}
	triggers, _ := on.(map[string]any)
	for _, event := range []string{"push", "pull_request"} {
		if _, ok := triggers[event]; !ok {
			t.Errorf("on: %v, want push and pull_request", on)
		}
	}
	jobs, _ := wf["jobs"].(map[string]any)
	if len(jobs) == 0 {
		t.Fatalf("jobs: %v", wf["jobs"])
	}
	var runs []string
	setsVar := false
	for name, j := range jobs {
		job, _ := j.(map[string]any)
		if r, _ := job["runs-on"].(string); r == "" {
			t.Errorf("job %s: runs-on %v", name, job["runs-on"])
		}
		steps, _ := job["steps"].([]any)
		if len(steps) == 0 {
			t.Errorf("job %s: no steps", name)
		}
		for i, s := range steps {
			step, _ := s.(map[string]any)
			run, _ := step["run"].(string)
			uses, _ := step["uses"].(string)
			if (run == "") == (uses == "") {
				t.Errorf("job %s, step %d: want one of run and uses: %v", name, i, s)
			}
			runs = append(runs, run)
			env, _ := step["env"].(map[string]any)
			if _, ok := env[envoytest.EnvVar]; ok || strings.Contains(run, envoytest.EnvVar+"=") && strings.Contains(run, "go test") {
				setsVar = true
			}
		}
	}
	if !setsVar {
		t.Errorf("no step runs go test with %s set", envoytest.EnvVar)
	}
	all := strings.Join(runs, "\n")
	if !strings.Contains(all, "docker cp") || !strings.Contains(all, "/usr/local/bin/envoy") {
		t.Errorf("no step copies /usr/local/bin/envoy out of the image:\n%s", all)
	}

	compose := composeEnvoyImage(t, filepath.Join(root, "docker-compose.yml"))
	images := envoyImages(wf)
	if len(images) == 0 {
		t.Fatal("envoy.yml names no envoyproxy/envoy image")
	}
	for _, img := range images {
		if img != compose {
			t.Errorf("envoy.yml runs %s; docker-compose.yml pins %s", img, compose)
		}
	}
}

// composeEnvoyImage is the image of docker-compose.yml's Envoy services,
// which must be one, pinned by digest.
func composeEnvoyImage(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Image string `json:"image"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	image := ""
	for _, name := range []string{"envoy", "envoy-shared"} {
		img := c.Services[name].Image
		switch {
		case !strings.HasPrefix(img, "envoyproxy/envoy:") || !strings.Contains(img, "@sha256:"):
			t.Fatalf("docker-compose.yml service %s: image %q, want envoyproxy/envoy pinned by digest", name, img)
		case image != "" && img != image:
			t.Fatalf("docker-compose.yml's Envoy services run %s and %s", image, img)
		}
		image = img
	}
	return image
}

// envoyImages are the envoyproxy/envoy image references in any string of v
// (env values, run scripts).
func envoyImages(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			out = append(out, envoyImages(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, envoyImages(x)...)
		}
	case string:
		for _, f := range strings.Fields(v) {
			if i := strings.Index(f, "envoyproxy/envoy:"); i >= 0 {
				out = append(out, strings.Trim(f[i:], `"'`))
			}
		}
	}
	return out
}
