package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"modelgate/authz/pricing"
)

// problems collects every validation problem with its location.
type problems struct {
	list []string
	// bad are the locations of values of the wrong type. They decode as
	// if absent, so a later problem within one would only repeat it.
	bad []string
}

func (p *problems) add(at, format string, args ...any) {
	for _, b := range p.bad {
		if at == b || strings.HasPrefix(at, b+".") || strings.HasPrefix(at, b+"[") {
			return
		}
	}
	msg := fmt.Sprintf(format, args...)
	if at != "" {
		msg = at + ": " + msg
	}
	p.list = append(p.list, msg)
}

// wrongType reports the value at a location as unusable.
func (p *problems) wrongType(at, format string, args ...any) {
	p.add(at, format, args...)
	p.bad = append(p.bad, at)
}

// dropped reports whether the value at a location was of the wrong type.
func (p *problems) dropped(at string) bool { return slices.Contains(p.bad, at) }

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &Error{Problems: p.list}
}

// Error lists every problem of a configuration.
type Error struct{ Problems []string }

// Error joins the problems, one per line.
func (e *Error) Error() string {
	return fmt.Sprintf("%d problem(s):\n  %s", len(e.Problems), strings.Join(e.Problems, "\n  "))
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// check reports, in v (YAML decoded as JSON, numbers as json.Number) at
// location at, the keys type t does not know, so that a misspelt key is an
// error rather than a silently ignored setting, and the values that do not
// fit it. It returns v with every such value replaced by nil (absent), so
// that decoding it into t fails nowhere and every other problem is found
// too.
func check(p *problems, at string, v any, t reflect.Type) any {
	if v == nil {
		return nil // null, or a key without a value: absent
	}
	if t == typeOf[Duration]() {
		const want = `a duration such as "10s"`
		switch v := v.(type) {
		case string:
			if _, err := time.ParseDuration(v); err != nil {
				p.wrongType(at, "%q is not %s", v, want)
				return nil
			}
		case json.Number, bool:
			p.wrongType(at, "%q is not %s", fmt.Sprint(v), want)
			return nil
		default:
			p.wrongType(at, "want %s, got %s", want, describe(v))
			return nil
		}
		return v
	}
	if t == typeOf[pricing.Nanos]() {
		return checkAmount(p, at, v)
	}
	if t == typeOf[time.Time]() {
		return checkInstant(p, at, v)
	}
	if name, ok := v.(string); ok && t == typeOf[Alias]() { // aliases: [codex, {name: gpt5, listed: true}]
		return map[string]any{"name": name}
	}
	if t == typeOf[RetryCondition]() {
		if n, ok := v.(json.Number); ok { // retry_on: [5xx, 429]: YAML reads 429 as a number
			return n.String()
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return check(p, at, v, t.Elem())
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			p.wrongType(at, "want an object, got %s", describe(v))
			return nil
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			ft, known := fields[k]
			if !known {
				p.add(join(at, k), "unknown key%s", didYouMean(k, fields))
				delete(obj, k) // encoding/json would match it ignoring case
				continue
			}
			obj[k] = check(p, join(at, k), obj[k], ft)
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			p.wrongType(at, "want a list, got %s", describe(v))
			return nil
		}
		for i := range arr {
			arr[i] = check(p, fmt.Sprintf("%s[%d]", at, i), arr[i], t.Elem())
		}
	case reflect.String:
		switch v.(type) {
		case string:
		case json.Number, bool: // such as api_version: 2024
			p.wrongType(at, "want a string, got %s: quote it", describe(v))
			return nil
		default:
			p.wrongType(at, "want a string, got %s", describe(v))
			return nil
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			p.wrongType(at, "want true or false, got %s", describe(v))
			return nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			p.wrongType(at, "want an integer, got %s", describe(v))
			return nil
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				p.wrongType(at, "%s is out of range", n)
			} else {
				p.wrongType(at, "want an integer, got %s", n)
			}
			return nil
		}
	}
	return v
}

// describe names a decoded value in a problem: a scalar as written, an
// object or list by its kind.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

// didYouMean suggests the known key closest to an unknown one: equal but
// for case, or at most two edits away (and fewer edits than it has
// characters). It returns "" when none is.
func didYouMean(key string, fields map[string]reflect.Type) string {
	best, bestDist := "", 3
	for _, k := range sortedKeys(fields) {
		d := editDistance(strings.ToLower(key), strings.ToLower(k))
		if d < bestDist && d < len(key) {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the optimal string alignment distance between a and b:
// the fewest insertions, deletions, substitutions and transpositions of
// adjacent bytes that turn one into the other.
func editDistance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = f.Type
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

func typeErrorPath(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	return ""
}

func typeErrorText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("want %s, got %s", te.Type, te.Value)
	}
	return err.Error()
}
