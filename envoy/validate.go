package envoy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// Problem is one thing wrong with a bootstrap.
type Problem struct {
	// Path locates it by proto field names, such as
	// static_resources.clusters[2].name; the fields of a message packed in
	// an Any follow the Any's own path (….typed_config.stat_prefix).
	Path string
	// Message says what is wrong.
	Message string
}

// Error renders the problem as "path: message".
func (p *Problem) Error() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Validate checks a bootstrap beyond what parsing does: the
// protoc-gen-validate rules of every message, including those packed in an
// Any (which ValidateAll does not look into), and the cross-references
// Envoy checks when it loads the bootstrap. It returns nil or every
// Problem, joined with errors.Join.
func Validate(b *bootstrapv3.Bootstrap) error {
	var ps []*Problem
	validateTree(b, "", &ps)
	ps = append(ps, crossCheck(b)...)
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// validator is what protoc-gen-validate generates on every message.
type validator interface{ ValidateAll() error }

// validateTree runs PGV on m, which covers m's fields down to the next
// Any, and then looks for Anys below it.
func validateTree(m proto.Message, path string, ps *[]*Problem) {
	if v, ok := m.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			*ps = append(*ps, pgvProblems(path, m.ProtoReflect().Descriptor(), err)...)
		}
	}
	findAnys(m.ProtoReflect(), path, ps)
}

// findAnys walks every message field set in m and validates the content
// of each Any it meets.
func findAnys(m protoreflect.Message, path string, ps *[]*Problem) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		at := joinPath(path, string(fd.Name()))
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				for _, k := range sortedKeys(v.Map()) {
					visit(v.Map().Get(k).Message(), fmt.Sprintf("%s[%s]", at, k.String()), ps)
				}
			}
		case fd.Message() == nil:
		case fd.IsList():
			for i := range v.List().Len() {
				visit(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", at, i), ps)
			}
		default:
			visit(v.Message(), at, ps)
		}
		return true
	})
}

func visit(m protoreflect.Message, path string, ps *[]*Problem) {
	a, ok := m.Interface().(*anypb.Any)
	if !ok {
		findAnys(m, path, ps)
		return
	}
	inner, err := a.UnmarshalNew()
	if err != nil {
		*ps = append(*ps, &Problem{Path: path, Message: fmt.Sprintf("unpacking %s: %v", a.GetTypeUrl(), err)})
		return
	}
	validateTree(inner, path, ps)
}

func sortedKeys(m protoreflect.Map) []protoreflect.MapKey {
	var keys []protoreflect.MapKey
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.SortFunc(keys, func(a, b protoreflect.MapKey) int { return cmp.Compare(a.String(), b.String()) })
	return keys
}

func joinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// fieldError and multiError are the methods of PGV's generated
// <Message>ValidationError and <Message>MultiError types.
type fieldError interface {
	Field() string
	Reason() string
	Cause() error
}

type multiError interface{ AllErrors() []error }

// embedded is PGV's reason for an error in a sub-message; its cause holds
// the sub-message's own errors.
const embedded = "embedded message failed validation"

// pgvProblems turns PGV's tree of errors into one Problem per leaf, with
// the Go field names along the way turned into a path of proto names.
func pgvProblems(path string, md protoreflect.MessageDescriptor, err error) []*Problem {
	if me, ok := err.(multiError); ok {
		var ps []*Problem
		for _, e := range me.AllErrors() {
			ps = append(ps, pgvProblems(path, md, e)...)
		}
		return ps
	}
	fe, ok := err.(fieldError)
	if !ok {
		return []*Problem{{Path: path, Message: err.Error()}}
	}
	name, sub := protoField(md, fe.Field())
	at := joinPath(path, name)
	if fe.Reason() == embedded && fe.Cause() != nil && sub != nil {
		return pgvProblems(at, sub, fe.Cause())
	}
	msg := fe.Reason()
	if fe.Cause() != nil {
		msg += ": " + fe.Cause().Error()
	}
	return []*Problem{{Path: at, Message: msg}}
}

// protoField maps PGV's field name, such as "Listeners[0]" or
// "PortValue", to the proto name with the same suffix, and returns the
// message type of the field's values, if any.
func protoField(md protoreflect.MessageDescriptor, goName string) (string, protoreflect.MessageDescriptor) {
	base, suffix, _ := strings.Cut(goName, "[")
	if suffix != "" {
		suffix = "[" + suffix
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !strings.EqualFold(strings.ReplaceAll(string(fd.Name()), "_", ""), base) {
			continue
		}
		if fd.IsMap() {
			return string(fd.Name()) + suffix, fd.MapValue().Message()
		}
		return string(fd.Name()) + suffix, fd.Message()
	}
	return goName, nil
}
