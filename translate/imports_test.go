package translate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Translators are pure: bytes in, bytes out. They do no I/O, so they
// import no networking, storage or gateway package, and of net/http they
// use only what names statuses and sniffs content types. The shared test
// helpers (translatetest) are exempt.
func TestTranslateDoesNoNetworking(t *testing.T) {
	deps := goList(t, "-deps", "-f", "{{.ImportPath}}", "./...")
	for _, dep := range deps {
		for _, banned := range []string{"modelgate/extproc", "modelgate/authz", "modelgate/ratelimit", "modelgate/envoy",
			"google.golang.org/grpc", "github.com/redis/", "github.com/jackc/", "database/sql", "os/exec"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") || strings.HasSuffix(banned, "/") && strings.HasPrefix(dep, banned) {
				t.Errorf("translate depends on %s", dep)
			}
		}
	}
	for _, pkg := range goList(t, "-f", "{{.Dir}}", "./...") {
		if filepath.Base(pkg) == "translatetest" {
			continue
		}
		checkNetHTTPUse(t, pkg)
	}
}

// netHTTPAllowed are the net/http names translators may use: none opens
// a connection.
var netHTTPAllowed = []string{"StatusText", "DetectContentType", "CanonicalHeaderKey"}

// checkNetHTTPUse fails for a non-test file of dir that imports net or
// crypto/tls, or uses a name of net/http other than a status code or
// netHTTPAllowed.
func checkNetHTTPUse(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		httpName := ""
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch p {
			case "net", "crypto/tls", "net/rpc", "net/smtp":
				t.Errorf("%s imports %s", path, p)
			case "net/http":
				httpName = "http"
				if imp.Name != nil {
					httpName = imp.Name.Name
				}
			}
		}
		if httpName == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == httpName &&
				!strings.HasPrefix(sel.Sel.Name, "Status") && !slices.Contains(netHTTPAllowed, sel.Sel.Name) {
				t.Errorf("%s: uses http.%s; translators do no I/O", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

// goList runs go list in this package's directory with args and returns
// its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}
