package envoygateway_test

// Go decoding checks field names and types, not what the CRDs add on top
// (kubebuilder enums, patterns, required fields, bounds): body: buffered
// decodes fine and fails on the API server. crdSchemas loads the CRDs the
// modules ship (Envoy Gateway's, and Gateway API's standard channel, the
// subset every platform installs) and validate walks a manifest against
// one, as the API server's OpenAPI validation does. CEL rules
// (x-kubernetes-validations) are not evaluated.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// crdDirs are where the CRDs are, by module.
var crdDirs = map[string]string{
	"github.com/envoyproxy/gateway": "charts/gateway-helm/charts/crds/crds/generated",
	"sigs.k8s.io/gateway-api":       "config/crd/standard",
}

// schema is the subset of OpenAPI v3 (structural schemas) that CRDs use.
type schema struct {
	Type                 string             `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	Required             []string           `json:"required"`
	Enum                 []any              `json:"enum"`
	Pattern              string             `json:"pattern"`
	MinLength            *int               `json:"minLength"`
	MaxLength            *int               `json:"maxLength"`
	Minimum              *float64           `json:"minimum"`
	Maximum              *float64           `json:"maximum"`
	MinItems             *int               `json:"minItems"`
	MaxItems             *int               `json:"maxItems"`
	AllOf                []*schema          `json:"allOf"`
	AnyOf                []*schema          `json:"anyOf"`
	OneOf                []*schema          `json:"oneOf"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string"`
	PreserveUnknown      bool               `json:"x-kubernetes-preserve-unknown-fields"`
}

type crd struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Schema struct {
				OpenAPIV3Schema *schema `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

var (
	crdOnce  sync.Once
	crdIndex map[string]*schema // "group/version/Kind"
	crdErr   error
)

// crdSchemas indexes the CRDs of the module versions in go.mod.
func crdSchemas(t *testing.T) map[string]*schema {
	t.Helper()
	crdOnce.Do(func() { crdIndex, crdErr = loadCRDs() })
	if crdErr != nil {
		t.Fatalf("loading the CRDs: %v", crdErr)
	}
	return crdIndex
}

func loadCRDs() (map[string]*schema, error) {
	mods := slices.Sorted(func(yield func(string) bool) {
		for m := range crdDirs {
			if !yield(m) {
				return
			}
		}
	})
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	out, err := exec.Command(goCmd, append([]string{"list", "-m", "-f", "{{.Dir}}"}, mods...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %v: %w", mods, err)
	}
	dirs := strings.Fields(string(out))
	if len(dirs) != len(mods) {
		return nil, fmt.Errorf("go list -m %v: got %q (the module cache is needed)", mods, dirs)
	}
	idx := map[string]*schema{}
	for i, m := range mods {
		paths, err := filepath.Glob(filepath.Join(dirs[i], crdDirs[m], "*.yaml"))
		if err != nil || len(paths) == 0 {
			return nil, fmt.Errorf("no CRDs in %s (%v)", filepath.Join(dirs[i], crdDirs[m]), err)
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			for _, doc := range bytes.Split(data, []byte("\n---")) {
				var c crd
				if err := yaml.Unmarshal(doc, &c); err != nil {
					return nil, fmt.Errorf("%s: %w", p, err)
				}
				for _, v := range c.Spec.Versions {
					if v.Schema.OpenAPIV3Schema != nil {
						idx[c.Spec.Group+"/"+v.Name+"/"+c.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
					}
				}
			}
		}
	}
	return idx, nil
}

// validateCRD checks one manifest (YAML) against its CRD. ok is false when
// no CRD of the loaded ones defines the kind.
func validateCRD(idx map[string]*schema, doc []byte) (ok bool, errs []error) {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return true, []error{err}
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return true, []error{err}
	}
	apiVersion, _ := v["apiVersion"].(string)
	kind, _ := v["kind"].(string)
	s, ok := idx[apiVersion+"/"+kind]
	if !ok {
		return false, nil
	}
	name := ""
	if md, ok := v["metadata"].(map[string]any); ok {
		name, _ = md["name"].(string)
	}
	var w walker
	w.walk(kind+"/"+name, v, s)
	return true, w.errs
}

type walker struct{ errs []error }

func (w *walker) errorf(path, format string, args ...any) {
	w.errs = append(w.errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// walk validates v at path against s.
func (w *walker) walk(path string, v any, s *schema) {
	if s == nil || s.PreserveUnknown && len(s.Properties) == 0 {
		return
	}
	if !w.typeOK(path, v, s) {
		return
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		w.errorf(path, "%v is not one of %v", v, s.Enum)
	}
	switch v := v.(type) {
	case string:
		w.str(path, v, s)
	case json.Number:
		if f, err := v.Float64(); err == nil {
			if s.Minimum != nil && f < *s.Minimum || s.Maximum != nil && f > *s.Maximum {
				w.errorf(path, "%v is out of [%v, %v]", v, deref(s.Minimum), deref(s.Maximum))
			}
		}
	case []any:
		if s.MinItems != nil && len(v) < *s.MinItems || s.MaxItems != nil && len(v) > *s.MaxItems {
			w.errorf(path, "%d items, want [%v, %v]", len(v), deref(s.MinItems), deref(s.MaxItems))
		}
		for i, e := range v {
			w.walk(fmt.Sprintf("%s[%d]", path, i), e, s.Items)
		}
	case map[string]any:
		w.object(path, v, s)
	}
	w.combinators(path, v, s)
}

func (w *walker) typeOK(path string, v any, s *schema) bool {
	if s.IntOrString {
		switch n := v.(type) {
		case string:
			return true
		case json.Number:
			if _, err := n.Int64(); err == nil {
				return true
			}
		}
		w.errorf(path, "%v is not an integer or a string", v)
		return false
	}
	ok := true
	switch s.Type {
	case "":
	case "string":
		_, ok = v.(string)
	case "boolean":
		_, ok = v.(bool)
	case "integer":
		n, isNum := v.(json.Number)
		_, err := n.Int64()
		ok = isNum && err == nil
	case "number":
		_, ok = v.(json.Number)
	case "array":
		_, ok = v.([]any)
	case "object":
		_, ok = v.(map[string]any)
	}
	if !ok {
		w.errorf(path, "%v (%T) is not of type %s", v, v, s.Type)
	}
	return ok
}

func (w *walker) str(path, v string, s *schema) {
	n := utf8.RuneCountInString(v)
	if s.MinLength != nil && n < *s.MinLength || s.MaxLength != nil && n > *s.MaxLength {
		w.errorf(path, "%q has %d characters, want [%v, %v]", v, n, deref(s.MinLength), deref(s.MaxLength))
	}
	if s.Pattern == "" {
		return
	}
	// Kubernetes evaluates ECMA-262 patterns; the CRDs used here compile in
	// RE2, and one that does not is reported rather than skipped.
	re, err := regexp.Compile(s.Pattern)
	if err != nil {
		w.errorf(path, "pattern %q does not compile in Go: %v", s.Pattern, err)
		return
	}
	if !re.MatchString(v) {
		w.errorf(path, "%q does not match %s", v, s.Pattern)
	}
}

func (w *walker) object(path string, v map[string]any, s *schema) {
	for _, r := range s.Required {
		if _, ok := v[r]; !ok {
			w.errorf(path, "missing required field %q", r)
		}
	}
	var extra *schema
	free := len(s.Properties) == 0 // such as metadata: validated by the API server itself
	if len(s.AdditionalProperties) > 0 {
		if err := json.Unmarshal(s.AdditionalProperties, &extra); err != nil {
			free = true // additionalProperties: true
		}
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch p, ok := s.Properties[k]; {
		case ok:
			w.walk(path+"."+k, v[k], p)
		case extra != nil:
			w.walk(path+"."+k, v[k], extra)
		case !free && !s.PreserveUnknown:
			w.errorf(path, "unknown field %q", k)
		}
	}
}

// combinators apply allOf, anyOf and oneOf, which in structural schemas
// only add value validations (such as "one of these fields is required").
func (w *walker) combinators(path string, v any, s *schema) {
	for _, sub := range s.AllOf {
		w.walk(path, v, sub)
	}
	passes := func(sub *schema) bool {
		var sw walker
		sw.walk(path, v, sub)
		return len(sw.errs) == 0
	}
	if len(s.AnyOf) > 0 && !slices.ContainsFunc(s.AnyOf, passes) {
		w.errorf(path, "matches none of anyOf")
	}
	if len(s.OneOf) > 0 {
		n := 0
		for _, sub := range s.OneOf {
			if passes(sub) {
				n++
			}
		}
		if n != 1 {
			w.errorf(path, "matches %d of oneOf, want 1", n)
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return "-"
	}
	return *p
}
