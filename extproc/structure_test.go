package extproc_test

import (
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The server package keeps a structure a reader can hold: the exchange is
// no hub (at most 20 methods, an answer of at most 10 fields, no
// interface that hands it around), and its files form layers: fewer than
// a quarter of the references from one file to another run back up, to
// a file that reaches the first again (so lie on a cycle).
func TestServerPackageStructure(t *testing.T) {
	pkg, fset, info := typeCheck(t, "modelgate/extproc")
	ex, _ := pkg.Scope().Lookup("exchange").Type().(*types.Named)
	if ex == nil {
		t.Fatal("no type exchange")
	}
	if n := ex.NumMethods(); n > 20 {
		t.Errorf("exchange has %d methods, want at most 20", n)
	}
	answer := pkg.Scope().Lookup("answer").Type().Underlying().(*types.Struct)
	if answer.NumFields() > 10 {
		t.Errorf("answer has %d fields, want at most 10", answer.NumFields())
	}
	for _, name := range pkg.Scope().Names() {
		iface, ok := pkg.Scope().Lookup(name).Type().Underlying().(*types.Interface)
		if !ok {
			continue
		}
		for m := range iface.Methods() {
			sig := m.Type().(*types.Signature)
			for p := range sig.Params().Variables() {
				if ptr, ok := p.Type().(*types.Pointer); ok && ptr.Elem() == types.Type(ex) {
					t.Errorf("interface %s: method %s takes *exchange", name, m.Name())
				}
			}
		}
	}
	edges := fileReferences(pkg, fset, info)
	back := cyclic(edges)
	t.Logf("exchange: %d methods; answer: %d fields; %d file-to-file references, %d running back up (%.0f %%)",
		ex.NumMethods(), answer.NumFields(), len(edges), len(back), 100*float64(len(back))/float64(len(edges)))
	if 4*len(back) >= len(edges) {
		t.Errorf("%d of %d file-to-file references run back up: %s", len(back), len(edges), strings.Join(back, ", "))
	}
}

// Between the module's top-level packages (extproc, translate, authz,
// ratelimit, envoy, cmd, deploy: a package and everything under it) no
// import runs back up: their graph has no cycle.
func TestTopLevelPackagesHaveNoCycle(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "modelgate/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	top := func(path string) string {
		rest, ok := strings.CutPrefix(path, "modelgate/")
		if !ok {
			return ""
		}
		first, _, _ := strings.Cut(rest, "/")
		return first
	}
	edges := map[[2]string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fs := strings.Fields(line)
		from := top(fs[0])
		for _, imp := range fs[1:] {
			if to := top(imp); to != "" && to != from {
				edges[[2]string{from, to}] = true
			}
		}
	}
	if len(edges) < 5 {
		t.Fatalf("found only %v", edges)
	}
	if back := cyclic(edges); len(back) > 0 {
		t.Errorf("imports between top-level packages that run back up: %s", strings.Join(back, ", "))
	}
}

// typeCheck type-checks a package of the module from its source and its
// dependencies' export data (go list -export).
func typeCheck(t *testing.T, path string) (*types.Package, *token.FileSet, *types.Info) {
	t.Helper()
	out, err := exec.Command("go", "list", "-export", "-deps", "-json", path).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var target struct {
		Dir     string
		GoFiles []string
	}
	exports := map[string]string{}
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p struct {
			ImportPath, Dir, Export string
			GoFiles                 []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if p.ImportPath == path {
			target.Dir, target.GoFiles = p.Dir, p.GoFiles
		}
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, f := range target.GoFiles {
		af, err := parser.ParseFile(fset, filepath.Join(target.Dir, f), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, af)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) { return os.Open(exports[p]) })}
	pkg, err := conf.Check(path, fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	return pkg, fset, info
}

// fileReferences are the pairs of files of pkg where the first uses a
// declaration of the second: a package-level name, a field or a method.
func fileReferences(pkg *types.Package, fset *token.FileSet, info *types.Info) map[[2]string]bool {
	edges := map[[2]string]bool{}
	add := func(at token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() || obj.Parent() != nil && obj.Parent() != pkg.Scope() {
			return
		}
		from, to := filepath.Base(fset.Position(at).Filename), filepath.Base(fset.Position(obj.Pos()).Filename)
		if from != to {
			edges[[2]string{from, to}] = true
		}
	}
	for id, obj := range info.Uses {
		add(id.Pos(), obj)
	}
	for sel, s := range info.Selections {
		add(sel.Sel.Pos(), s.Obj())
	}
	return edges
}

// cyclic are the edges whose target reaches their source again, sorted.
func cyclic(edges map[[2]string]bool) []string {
	next := map[string][]string{}
	for e := range edges {
		next[e[0]] = append(next[e[0]], e[1])
	}
	reaches := func(from, to string) bool {
		seen, stack := map[string]bool{from: true}, []string{from}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n == to {
				return true
			}
			for _, m := range next[n] {
				if !seen[m] {
					seen[m] = true
					stack = append(stack, m)
				}
			}
		}
		return false
	}
	var out []string
	for e := range edges {
		if reaches(e[1], e[0]) {
			out = append(out, e[0]+" → "+e[1])
		}
	}
	slices.Sort(out)
	return out
}
