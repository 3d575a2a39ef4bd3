package envoy

import (
	"strconv"

	"modelgate/envoy/routing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// localReply is one mapper: which local replies it matches and the
// error they become, in the OpenAI API's shape and, for a client of the
// Messages API, in that API's (its error type).
type localReply struct {
	flags        []string // response flags; nil matches on status instead
	status       uint32
	message      string
	typ, code    string // the OpenAI error's
	messagesType string // the Messages API error's
}

// localReplies turn Envoy's own replies into errors, after the mapper that
// leaves the ext_proc server's replies alone (GatewayReplyKey). Flags name
// the cause where Envoy sets one (HTTP connection manager docs,
// local_reply); the rest are mapped by status. The Messages API's types
// are those the server gives the same statuses (api.MessagesErrorType).
var localReplies = []localReply{
	{flags: []string{"UT"}, message: "The model's provider did not answer in time.", typ: "server_error", code: "timeout", messagesType: "timeout_error"},
	{flags: []string{"UPE"}, message: "The model's provider broke off its answer or sent a broken one.", typ: "server_error", messagesType: "api_error"},
	{flags: []string{"UF", "URX", "UH", "NC", "UO", "UR", "LR", "UC"},
		message: "The model's provider could not be reached.", typ: "server_error", messagesType: "overloaded_error"},
	{flags: []string{"SI"}, message: "The request timed out.", typ: "server_error", code: "timeout", messagesType: "timeout_error"},
	{status: 413, message: TooLargeMessage, typ: "invalid_request_error", code: "request_too_large", messagesType: "request_too_large"},
	{status: 408, message: "The request was not received in time.", typ: "invalid_request_error", code: "request_timeout", messagesType: "invalid_request_error"},
	{status: 500, message: InternalMessage, typ: "server_error", messagesType: "api_error"},
	{status: 504, message: "The gateway timed out while processing the request.", typ: "server_error", code: "timeout", messagesType: "timeout_error"},
}

// Messages of Envoy's own 413 and 500, the texts of the server's replies
// for the same errors, so that a client reads one text whoever answered.
const (
	TooLargeMessage = "The request body is larger than the gateway accepts."
	InternalMessage = "The gateway had an internal error while processing your request."
)

// errorJSON renders an OpenAI ErrorResponse; param is always null, code
// when empty. No substitution operators: the bodies are fixed text, so no
// Envoy detail string can break their JSON.
func errorJSON(message, typ, code string) string {
	c := "null"
	if code != "" {
		c = strconv.Quote(code)
	}
	return `{"error":{"message":` + strconv.Quote(message) + `,"type":` + strconv.Quote(typ) + `,"param":null,"code":` + c + `}}`
}

// messagesErrorJSON renders the Messages API's error body, as fixed text.
func messagesErrorJSON(message, typ string) string {
	return `{"type":"error","error":{"type":` + strconv.Quote(typ) + `,"message":` + strconv.Quote(message) + `}}`
}

// GatewayReplyKey is the dynamic metadata key, in the server's metadata
// namespace, that the ext_proc server sets to true with each of its
// immediate responses. Envoy makes those local replies too, and
// local_reply_config would otherwise rewrite them: a 413 or 500 of the
// server's would get the mapper's generic body and routing.LocalReplyHeader, and
// after a fallback's retries ran out, the router's sticky URX or UO flag
// would make the "could not be reached" mapper replace the server's
// normalized provider error. ext_proc applies a reply's dynamic_metadata
// before it acts on its immediate_response (ext_proc.cc,
// onReceiveMessage), and mappers are evaluated when the local reply is
// made (local_reply.cc, rewrite), so the marker is there in time.
const GatewayReplyKey = "gateway_reply"

// localReplyConfig maps Envoy's local replies to errors in the shape of
// the client's API, each marked with routing.LocalReplyHeader and carrying
// the request's x-request-id (the gateway's id once the ext_proc server
// saw the request), as the server's own answers do. Its first mapper
// matches the ext_proc server's own replies and changes nothing: the
// first matching mapper wins, and without a format of its own or a
// top-level one the body stays as the server wrote it. Then each reply of
// a Messages API client (routing.DialectKey) becomes that API's error,
// and every other reply the OpenAI API's. Where Envoy sends its replies
// to the ext_proc server (1.37), the server rewrites them again with the
// model's name.
func localReplyConfig(namespace string) *hcmv3.LocalReplyConfig {
	ms := []*hcmv3.ResponseMapper{{Filter: gatewayReplyFilter(namespace)}}
	for _, lr := range localReplies {
		filter := &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_AndFilter{
			AndFilter: &accesslogv3.AndFilter{Filters: []*accesslogv3.AccessLogFilter{messagesClientFilter(namespace), lr.filter()}}}}
		ms = append(ms, replyMapper(filter, messagesErrorJSON(lr.message, lr.messagesType)))
	}
	for _, lr := range localReplies {
		ms = append(ms, replyMapper(lr.filter(), errorJSON(lr.message, lr.typ, lr.code)))
	}
	return &hcmv3.LocalReplyConfig{Mappers: ms}
}

// replyMapper is the mapper of the replies filter matches: body, the
// LocalReplyHeader and the request's x-request-id.
func replyMapper(filter *accesslogv3.AccessLogFilter, body string) *hcmv3.ResponseMapper {
	return &hcmv3.ResponseMapper{
		Filter: filter,
		HeadersToAdd: []*corev3.HeaderValueOption{{
			Header:       &corev3.HeaderValue{Key: routing.LocalReplyHeader, Value: "%RESPONSE_CODE_DETAILS%"},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		}, {
			Header:       &corev3.HeaderValue{Key: "x-request-id", Value: "%REQ(x-request-id)%"},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		}},
		BodyFormatOverride: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: body},
			}},
			ContentType: "application/json",
		},
	}
}

// messagesClientFilter matches the replies to a client of the Messages
// API: the ext_proc server set routing.DialectKey at the request's
// headers.
func messagesClientFilter(namespace string) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_MetadataFilter{
		MetadataFilter: &accesslogv3.MetadataFilter{
			Matcher: &matcherv3.MetadataMatcher{
				Filter: namespace,
				Path:   []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: routing.DialectKey}}},
				Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
					MatchPattern: &matcherv3.StringMatcher_Exact{Exact: routing.AnthropicDialect}}}},
			},
			MatchIfKeyNotFound: wrapperspb.Bool(false),
		},
	}}
}

func (lr localReply) filter() *accesslogv3.AccessLogFilter {
	if lr.flags != nil {
		return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
			ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: lr.flags},
		}}
	}
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_StatusCodeFilter{
		StatusCodeFilter: &accesslogv3.StatusCodeFilter{Comparison: &accesslogv3.ComparisonFilter{
			Op: accesslogv3.ComparisonFilter_EQ,
			Value: &corev3.RuntimeUInt32{DefaultValue: lr.status,
				RuntimeKey: "modelgate.local_reply." + strconv.Itoa(int(lr.status))},
		}},
	}}
}

// gatewayReplyFilter matches a local reply the ext_proc server made: its
// GatewayReplyKey is true. match_if_key_not_found is false, so Envoy's own
// replies, which lack it, do not match (access_log_impl.cc,
// MetadataFilter::evaluate).
func gatewayReplyFilter(namespace string) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_MetadataFilter{
		MetadataFilter: &accesslogv3.MetadataFilter{
			Matcher: &matcherv3.MetadataMatcher{
				Filter: namespace,
				Path:   []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: GatewayReplyKey}}},
				Value:  &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_BoolMatch{BoolMatch: true}},
			},
			MatchIfKeyNotFound: wrapperspb.Bool(false),
		},
	}}
}
