package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Every guide deploy/README.md links to is there, and so is every guide
// the README's "With Envoy" section names.
func TestGuidesExist(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#]+)\)`)
	for _, readme := range []string{"README.md", "../README.md"} {
		b, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if regexp.MustCompile(`^[a-z]+:`).MatchString(m[1]) {
				continue // a URL
			}
			n++
			if _, err := os.Stat(filepath.Join(filepath.Dir(readme), m[1])); err != nil {
				t.Errorf("%s links to %s, which is not there", readme, m[1])
			}
		}
		if readme == "README.md" && n < 6 {
			t.Errorf("%s links to %d guides", readme, n)
		}
	}
}
