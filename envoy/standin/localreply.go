package standin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// localReplyConfig is the connection manager's local_reply_config, as
// Envoy's local_reply.cc applies it (HTTP connection manager docs:
// local_reply): the first mapper whose filter matches rewrites the body,
// adds headers, changes the status, and may bring its own body format;
// otherwise the top-level body_format applies.
type localReplyConfig struct {
	mappers []*mapper
	format  *bodyFormat // nil: %LOCAL_REPLY_BODY% as text/plain
}

type mapper struct {
	filter  replyFilter
	status  int     // 0 keeps the status
	body    *string // the mapper's body
	headers []headerToAdd
	format  *bodyFormat
}

// replyFilter is an access-log filter evaluated on a local reply.
type replyFilter func(in replyInput) bool

// replyInput is what the filters see of a local reply when it is made
// (local_reply.cc, rewrite): its status, the response flags and the
// request's dynamic metadata at that moment.
type replyInput struct {
	code     int
	flags    []string
	metadata map[string]map[string]any
}

type headerToAdd struct {
	opt   *corev3.HeaderValueOption
	value format
}

type bodyFormat struct {
	text        format
	contentType string
}

// format is a substitution format string: literal text and operators.
type format []formatPart

type formatPart struct {
	literal  string
	operator string // RESPONSE_CODE, RESPONSE_CODE_DETAILS, RESPONSE_FLAGS, LOCAL_REPLY_BODY or REQ
	header   string // REQ's request header, lower case
}

// replyState is what the operators read.
type replyState struct {
	code           int
	details, flags string
	body           string
	request        headerMap // the request's headers as they are now
}

func (f format) render(s replyState) string {
	var b strings.Builder
	for _, p := range f {
		switch p.operator {
		case "":
			b.WriteString(p.literal)
		case "RESPONSE_CODE":
			b.WriteString(strconv.Itoa(s.code))
		case "RESPONSE_CODE_DETAILS":
			b.WriteString(s.details)
		case "RESPONSE_FLAGS":
			b.WriteString(s.flags)
		case "LOCAL_REPLY_BODY":
			b.WriteString(s.body)
		case "REQ": // a header the request lacks renders empty, and an empty header is not added
			v, _ := s.request.get(p.header)
			b.WriteString(v)
		}
	}
	return b.String()
}

// prepare builds a local reply's status, headers and body as Envoy's
// Utility::prepareLocalReply does: the sender's headers, then the
// local_reply_config rewrite, then content-length and content-type (a
// body changed by the rewrite gets the format's content type unless the
// rewrite set one; an empty body has neither header).
func (c *localReplyConfig) prepare(lr *localReply, flags []string, metadata map[string]map[string]any, request headerMap) (int, headerMap, string) {
	h := lr.headers.clone()
	ctBefore, _ := h.get("content-type")
	s := replyState{code: lr.status, details: lr.details, flags: flagString(flags), body: lr.body, request: request}
	final := c.format
	for _, m := range c.mappers {
		if !m.filter(replyInput{code: s.code, flags: flags, metadata: metadata}) {
			continue
		}
		if m.body != nil {
			s.body = *m.body
		}
		for _, ha := range m.headers { // %RESPONSE_CODE% is still the original code here
			h = addHeader(h, ha.opt, ha.value.render(s))
		}
		if m.status != 0 {
			s.code = m.status
		}
		if m.format != nil {
			final = m.format
		}
		break
	}
	body, contentType := s.body, "text/plain"
	if final != nil {
		body, contentType = final.text.render(s), final.contentType
	}
	ctAfter, hasCT := h.get("content-type")
	if body == "" {
		return s.code, h.del("content-length").del("content-type"), ""
	}
	h = h.set("content-length", strconv.Itoa(len(body)))
	if !hasCT || body != lr.body && ctAfter == ctBefore {
		h = h.set("content-type", contentType)
	}
	return s.code, h, body
}

func compileLocalReply(c *hcmv3.LocalReplyConfig) (*localReplyConfig, error) {
	out := &localReplyConfig{}
	if c == nil {
		return out, nil
	}
	if err := c.ValidateAll(); err != nil { // runtime_key is required there, and ignored here
		return nil, fmt.Errorf("standin: local_reply_config is invalid: %w", err)
	}
	for i, m := range c.GetMappers() {
		cm, err := compileMapper(m)
		if err != nil {
			return nil, fmt.Errorf("standin: local_reply_config mappers[%d]: %w", i, err)
		}
		out.mappers = append(out.mappers, cm)
	}
	if bf := c.GetBodyFormat(); bf != nil {
		f, err := compileBodyFormat(bf)
		if err != nil {
			return nil, fmt.Errorf("standin: local_reply_config body_format: %w", err)
		}
		out.format = f
	}
	return out, nil
}

func compileMapper(m *hcmv3.ResponseMapper) (*mapper, error) {
	f, err := compileFilter(m.GetFilter())
	if err != nil {
		return nil, err
	}
	out := &mapper{filter: f, status: int(m.GetStatusCode().GetValue())}
	if b := m.GetBody(); b != nil {
		s, ok := b.GetSpecifier().(*corev3.DataSource_InlineString)
		if !ok {
			return nil, unsupported("body: only inline_string is implemented")
		}
		out.body = &s.InlineString
	}
	for _, o := range m.GetHeadersToAdd() {
		key := strings.ToLower(o.GetHeader().GetKey())
		switch {
		case strings.HasPrefix(key, ":") || key == "host":
			return nil, fmt.Errorf("headers_to_add %q: Envoy refuses to modify pseudo-headers and host", key)
			//lint:ignore SA1019 the deprecated append is refused here
		case o.GetAppend() != nil, len(o.GetHeader().GetRawValue()) > 0:
			return nil, unsupported("headers_to_add %q: append and raw_value (use append_action and value)", key)
		}
		v, err := parseFormat(o.GetHeader().GetValue(), false)
		if err != nil {
			return nil, fmt.Errorf("headers_to_add %q: %w", key, err)
		}
		out.headers = append(out.headers, headerToAdd{opt: o, value: v})
	}
	if bf := m.GetBodyFormatOverride(); bf != nil {
		if out.format, err = compileBodyFormat(bf); err != nil {
			return nil, fmt.Errorf("body_format_override: %w", err)
		}
	}
	return out, nil
}

func compileFilter(f *accesslogv3.AccessLogFilter) (replyFilter, error) {
	switch spec := f.GetFilterSpecifier().(type) {
	case *accesslogv3.AccessLogFilter_StatusCodeFilter:
		cmp := spec.StatusCodeFilter.GetComparison()
		if cmp.GetValue().GetRuntimeKey() == "" { // Envoy's proto validation requires it; its value is not used here
			return nil, fmt.Errorf("status_code_filter: runtime_key is required")
		}
		v := int(cmp.GetValue().GetDefaultValue())
		switch cmp.GetOp() {
		case accesslogv3.ComparisonFilter_EQ:
			return func(in replyInput) bool { return in.code == v }, nil
		case accesslogv3.ComparisonFilter_GE:
			return func(in replyInput) bool { return in.code >= v }, nil
		case accesslogv3.ComparisonFilter_LE:
			return func(in replyInput) bool { return in.code <= v }, nil
		}
		return nil, unsupported("status_code_filter op %v (EQ, GE and LE are implemented)", cmp.GetOp())
	case *accesslogv3.AccessLogFilter_ResponseFlagFilter:
		want := spec.ResponseFlagFilter.GetFlags()
		return func(in replyInput) bool {
			if len(want) == 0 { // any flag set
				return len(in.flags) > 0
			}
			return slices.ContainsFunc(want, func(f string) bool { return slices.Contains(in.flags, f) })
		}, nil
	case *accesslogv3.AccessLogFilter_MetadataFilter:
		return compileMetadataFilter(spec.MetadataFilter)
	case *accesslogv3.AccessLogFilter_AndFilter, *accesslogv3.AccessLogFilter_OrFilter:
		var subs []*accesslogv3.AccessLogFilter
		and := false
		if a, ok := spec.(*accesslogv3.AccessLogFilter_AndFilter); ok {
			subs, and = a.AndFilter.GetFilters(), true
		} else {
			subs = spec.(*accesslogv3.AccessLogFilter_OrFilter).OrFilter.GetFilters()
		}
		var fs []replyFilter
		for _, s := range subs {
			sf, err := compileFilter(s)
			if err != nil {
				return nil, err
			}
			fs = append(fs, sf)
		}
		return func(in replyInput) bool {
			for _, sf := range fs {
				if sf(in) != and {
					return !and
				}
			}
			return and
		}, nil
	}
	return nil, unsupported("filter %T (status_code_filter, response_flag_filter, metadata_filter, and_filter and or_filter are implemented)",
		f.GetFilterSpecifier())
}

// compileMetadataFilter is Envoy's MetadataFilter (access_log_impl.cc):
// the value at the matcher's path in its namespace of the dynamic
// metadata; when it is there, the filter is the value matcher's answer,
// else match_if_key_not_found (default true). The matcher's invert is not
// read there, and is refused here. Value matchers: bool_match,
// string_match exact and present_match.
func compileMetadataFilter(f *accesslogv3.MetadataFilter) (replyFilter, error) {
	m := f.GetMatcher()
	if m == nil || m.GetInvert() || len(m.GetPath()) == 0 {
		return nil, unsupported("metadata_filter without a matcher, without a path or with invert")
	}
	var path []string
	for _, seg := range m.GetPath() {
		path = append(path, seg.GetKey())
	}
	var match func(v any) bool
	switch vm := m.GetValue().GetMatchPattern().(type) {
	case *matcherv3.ValueMatcher_BoolMatch:
		match = func(v any) bool { b, ok := v.(bool); return ok && b == vm.BoolMatch }
	case *matcherv3.ValueMatcher_PresentMatch:
		match = func(any) bool { return vm.PresentMatch }
	case *matcherv3.ValueMatcher_StringMatch:
		exact, ok := vm.StringMatch.GetMatchPattern().(*matcherv3.StringMatcher_Exact)
		if !ok || vm.StringMatch.GetIgnoreCase() {
			return nil, unsupported("metadata_filter string_match other than a case-sensitive exact match")
		}
		match = func(v any) bool { s, ok := v.(string); return ok && s == exact.Exact }
	default:
		return nil, unsupported("metadata_filter value %T (bool_match, string_match and present_match are implemented)", m.GetValue().GetMatchPattern())
	}
	notFound := f.GetMatchIfKeyNotFound() == nil || f.GetMatchIfKeyNotFound().GetValue()
	ns := m.GetFilter()
	return func(in replyInput) bool {
		var v any
		if m := in.metadata[ns]; m != nil {
			v = m
		}
		for _, k := range path {
			obj, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = obj[k]
		}
		if v == nil {
			return notFound
		}
		return match(v)
	}, nil
}

func compileBodyFormat(f *corev3.SubstitutionFormatString) (*bodyFormat, error) {
	var inline *corev3.DataSource_InlineString
	if src, ok := f.GetFormat().(*corev3.SubstitutionFormatString_TextFormatSource); ok {
		inline, _ = src.TextFormatSource.GetSpecifier().(*corev3.DataSource_InlineString)
	}
	if inline == nil || f.GetOmitEmptyValues() || len(f.GetFormatters()) > 0 || f.GetJsonFormatOptions() != nil {
		return nil, unsupported("only text_format_source.inline_string with content_type is implemented (no json_format, text_format, formatters or omit_empty_values)")
	}
	text, err := parseFormat(inline.InlineString, true)
	if err != nil {
		return nil, err
	}
	ct := f.GetContentType()
	if ct == "" {
		ct = "text/plain"
	}
	return &bodyFormat{text: text, contentType: ct}, nil
}

// parseFormat parses Envoy's substitution format syntax for the
// operators the stand-in implements; any other operator is refused.
func parseFormat(s string, body bool) (format, error) {
	var out format
	for s != "" {
		i := strings.IndexByte(s, '%')
		if i < 0 {
			out = append(out, formatPart{literal: s})
			break
		}
		if i > 0 {
			out = append(out, formatPart{literal: s[:i]})
		}
		rest := s[i+1:]
		j := strings.IndexByte(rest, '%')
		if j < 0 {
			return nil, fmt.Errorf("format %q: a %% without its closing %%", s)
		}
		op := rest[:j]
		if name, ok := strings.CutPrefix(op, "REQ("); ok && strings.HasSuffix(name, ")") && !strings.ContainsAny(name, "?:") {
			out = append(out, formatPart{operator: "REQ", header: strings.ToLower(strings.TrimSuffix(name, ")"))})
			s = rest[j+1:]
			continue
		}
		switch op {
		case "RESPONSE_CODE", "RESPONSE_CODE_DETAILS", "RESPONSE_FLAGS":
		case "LOCAL_REPLY_BODY":
			if !body {
				return nil, unsupported("format operator %%%s%% outside a body format", op)
			}
		default:
			return nil, unsupported("format operator %%%s%% (RESPONSE_CODE, RESPONSE_CODE_DETAILS, RESPONSE_FLAGS, LOCAL_REPLY_BODY and REQ(header) are implemented)", op)
		}
		out = append(out, formatPart{operator: op})
		s = rest[j+1:]
	}
	return out, nil
}
