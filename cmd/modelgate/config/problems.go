package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// problems collects every validation problem with its location.
type problems struct{ list []string }

func (p *problems) add(at, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if at != "" {
		msg = at + ": " + msg
	}
	p.list = append(p.list, msg)
}

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

// checkKeys reports keys the schema does not know, so that a misspelled key
// is an error rather than a silently ignored setting.
func checkKeys(p *problems, at string, v any, t reflect.Type) {
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok || t == typeOf[Duration]() {
			return // wrong types are reported by the decoder
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			ft, known := fields[k]
			if !known {
				p.add(join(at, k), "unknown key")
				continue
			}
			checkKeys(p, join(at, k), obj[k], ft)
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return
		}
		for i, item := range arr {
			checkKeys(p, fmt.Sprintf("%s[%d]", at, i), item, t.Elem())
		}
	}
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

func sortedKeys(m map[string]any) []string {
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
