package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's layout table names every folder at the top of the tree
// and every Go package, and names nothing that is not there.
func TestReadmeLayoutMatchesTree(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	named := map[string]bool{}
	folder := regexp.MustCompile("`([a-z][a-z0-9_./-]*)`")
	for _, line := range strings.Split(layout, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		for i, cell := range cells {
			for _, m := range folder.FindAllStringSubmatch(cell, -1) {
				p := strings.TrimSuffix(m[1], "/")
				// Folders: the first column's, and paths elsewhere; not
				// files, nor command names in passing.
				if !strings.Contains(filepath.Base(p), ".") && (i == 1 || strings.Contains(m[1], "/")) {
					named[p] = true
				}
			}
		}
	}
	for p := range named {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("the layout names %s, which is not in the tree", p)
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "modelgate/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, dir := range strings.Fields(string(out)) {
		if rel, err := filepath.Rel(abs, dir); err == nil && rel != "." {
			want = append(want, filepath.ToSlash(rel))
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "node_modules" {
			want = append(want, e.Name())
		}
	}
	if len(want) < 20 {
		t.Fatalf("found only %v", want)
	}
	for _, p := range want {
		if !named[p] && !namesUnder(named, p) {
			t.Errorf("the README's layout table does not name %s", p)
		}
	}
}

// namesUnder reports whether a named folder is inside dir.
func namesUnder(named map[string]bool, dir string) bool {
	for p := range named {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}
