package standin

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// attributesKey is where Envoy puts request_attributes: under the filter's
// fixed name, whatever the configured one (ext_proc.cc).
const attributesKey = "envoy.filters.http.ext_proc"

// attribute is one request_attributes CEL expression the stand-in
// evaluates, for an upstream ext_proc filter.
type attribute struct {
	expr string
	eval func(a *attemptInfo) (*structpb.Value, bool)
}

// attemptInfo is what an upstream filter's attributes see of its attempt.
type attemptInfo struct {
	h       *host
	n       int // upstream.request_attempt_count
	cluster string
	route   string
	marker  string // the debug-string marker of this Proxy
}

// hostMetadataPath is xds.upstream_host_metadata.filter_metadata['ns']['key'].
var hostMetadataPath = regexp.MustCompile(`^xds\.upstream_host_metadata\.filter_metadata\[(?:'([^']*)'|"([^"]*)")\]\[(?:'([^']*)'|"([^"]*)")\]$`)

// compileAttribute accepts the attributes the stand-in implements. The
// values are what ext_proc's evaluateAttributes (matching_utils.cc) makes
// of the CEL result: bool stays bool, int and uint become numbers, and
// everything else becomes a string through Expr::print (evaluator.cc),
// which prints a message with ShortDebugString.
func compileAttribute(expr string) (attribute, error) {
	str := func(s string) *structpb.Value { return structpb.NewStringValue(s) }
	switch expr {
	case "upstream.request_attempt_count":
		return attribute{expr, func(a *attemptInfo) (*structpb.Value, bool) {
			return structpb.NewNumberValue(float64(a.n)), true
		}}, nil
	case "xds.cluster_name":
		return attribute{expr, func(a *attemptInfo) (*structpb.Value, bool) { return str(a.cluster), true }}, nil
	case "xds.route_name":
		return attribute{expr, func(a *attemptInfo) (*structpb.Value, bool) { return str(a.route), true }}, nil
	case "upstream.address":
		return attribute{expr, func(a *attemptInfo) (*structpb.Value, bool) { return str(a.h.addr), true }}, nil
	case "xds.upstream_host_metadata":
		// A Metadata message: its debug string, which recent protobuf
		// releases prefix with a marker so that nobody parses it.
		return attribute{expr, func(a *attemptInfo) (*structpb.Value, bool) {
			return str(a.marker + " " + shortDebugString(a.h.metadata)), true
		}}, nil
	}
	if m := hostMetadataPath.FindStringSubmatch(expr); m != nil {
		ns, key := m[1]+m[2], m[3]+m[4]
		return attribute{expr, func(a *attemptInfo) (*structpb.Value, bool) {
			v, ok := a.h.metadata.GetFilterMetadata()[ns].GetFields()[key]
			if !ok { // no such key: a CEL error, and the attribute is left out
				return nil, false
			}
			return celValue(v), true
		}}, nil
	}
	return attribute{}, unsupported("ext_proc request_attributes %q (upstream.request_attempt_count, upstream.address, xds.cluster_name, "+
		"xds.route_name, xds.upstream_host_metadata and xds.upstream_host_metadata.filter_metadata['ns']['key'] are implemented)", expr)
}

// celValue is a Struct value as a CEL value handed to evaluateAttributes.
func celValue(v *structpb.Value) *structpb.Value {
	switch k := v.GetKind().(type) {
	case *structpb.Value_BoolValue:
		return v
	case *structpb.Value_StringValue:
		return v
	case *structpb.Value_NumberValue: // a CEL double: printed with absl::StrCat
		return structpb.NewStringValue(strconv.FormatFloat(k.NumberValue, 'g', 6, 64))
	case *structpb.Value_StructValue:
		return structpb.NewStringValue("CelMap value")
	case *structpb.Value_ListValue:
		return structpb.NewStringValue("CelList value")
	}
	return structpb.NewStringValue("NULL")
}

// debugMarkers are the prefixes protobuf puts on debug strings, one chosen
// per process.
var debugMarkers = []string{"goo.gle/debugstr", "goo.gle/debugonly", "goo.gle/debugproto"}

// shortDebugString renders Metadata as C++ ShortDebugString does: text
// format on one line, map entries sorted by key.
func shortDebugString(md *corev3.Metadata) string {
	var parts []string
	keys := make([]string, 0, len(md.GetFilterMetadata()))
	for k := range md.GetFilterMetadata() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, "filter_metadata { key: "+cEscape(k)+" value "+structText(md.GetFilterMetadata()[k])+" }")
	}
	return strings.Join(parts, " ")
}

func structText(s *structpb.Struct) string {
	keys := make([]string, 0, len(s.GetFields()))
	for k := range s.GetFields() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, "fields { key: "+cEscape(k)+" value "+valueText(s.GetFields()[k])+" }")
	}
	return braces(parts)
}

func braces(parts []string) string {
	if len(parts) == 0 {
		return "{ }"
	}
	return "{ " + strings.Join(parts, " ") + " }"
}

func valueText(v *structpb.Value) string {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		return "{ null_value: NULL_VALUE }"
	case *structpb.Value_NumberValue:
		return "{ number_value: " + simpleDtoa(k.NumberValue) + " }"
	case *structpb.Value_StringValue:
		return "{ string_value: " + cEscape(k.StringValue) + " }"
	case *structpb.Value_BoolValue:
		return "{ bool_value: " + strconv.FormatBool(k.BoolValue) + " }"
	case *structpb.Value_StructValue:
		return "{ struct_value " + structText(k.StructValue) + " }"
	case *structpb.Value_ListValue:
		var parts []string
		for _, e := range k.ListValue.GetValues() {
			parts = append(parts, "values "+valueText(e))
		}
		return "{ list_value " + braces(parts) + " }"
	}
	return "{ }"
}

// simpleDtoa is protobuf's SimpleDtoa: %.15g if that reads back exactly,
// else %.17g.
func simpleDtoa(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', 15, 64)
	if back, _ := strconv.ParseFloat(s, 64); back != f {
		s = strconv.FormatFloat(f, 'g', 17, 64)
	}
	return s
}

// cEscape quotes a string as text format does (CEscape): \n \r \t \" \'
// \\ and octal escapes for other bytes outside printable ASCII.
func cEscape(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
