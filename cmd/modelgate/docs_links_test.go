package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every document the repository cites is in it, so that a user's clone
// is complete: a Markdown link between its documents resolves, and a
// document named in code, configuration or prose (an upper-case name
// such as README.md or envoy/COMPATIBILITY.md, with or without its folders) is
// there, beside the file that names it or from the repository's root.
// The copies of other projects' files under testdata/fixtures keep their
// own links.
func TestCitedDocumentsAreInTheRepository(t *testing.T) {
	root := filepath.Join("..", "..")
	link := regexp.MustCompile(`\]\(([^)\s#]+)(?:#[^)]*)?\)`)
	named := regexp.MustCompile(`(?:[A-Za-z0-9_.-]+/)*[A-Z][A-Z0-9_]*\.md\b`)
	pathChar := func(c byte) bool {
		return c == '_' || c == '.' || c == '-' || c == '/' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	}
	exists := func(from, ref string) bool {
		for _, p := range []string{filepath.Join(filepath.Dir(from), ref), filepath.Join(root, ref)} {
			if _, err := os.Stat(p); err == nil {
				return true
			}
		}
		return false
	}
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".modelgate":
				return filepath.SkipDir
			}
			if rel == "testdata/fixtures" {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "package-lock.json" {
			return nil // npm's record of packages, whose licenses name their own files
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".yaml", ".yml", ".json", ".tpl", ".txt":
		default:
			if d.Name() != "Dockerfile" && rel != ".ci/run" {
				return nil
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(data)
		checked++
		if filepath.Ext(path) == ".md" {
			for _, m := range link.FindAllStringSubmatch(text, -1) {
				if ref := m[1]; !strings.Contains(ref, ":") && !exists(path, ref) {
					t.Errorf("%s links %s, which is not in the repository", rel, ref)
				}
			}
		}
		for _, ix := range named.FindAllStringIndex(text, -1) {
			if ix[0] > 0 && pathChar(text[ix[0]-1]) {
				continue // the end of a longer name, such as a fixture's
			}
			ref := text[ix[0]:ix[1]]
			if !exists(path, ref) {
				t.Errorf("%s names %s, which is not in the repository", rel, ref)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files: the walk missed the tree", checked)
	}
}
