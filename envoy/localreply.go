package envoy

import (
	"strconv"

	"modelgate/extproc/routing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// localReply is one mapper: which local replies it matches and the
// OpenAI error they become.
type localReply struct {
	flags  []string // response flags; nil matches on status instead
	status uint32
	body   string
}

// localReplies turn Envoy's own replies into OpenAI errors, after the
// mapper that leaves the ext_proc server's replies alone (GatewayReplyKey).
// Flags name the cause where Envoy sets one (HTTP connection manager docs,
// local_reply); the rest are mapped by status.
var localReplies = []localReply{
	{flags: []string{"UT"}, body: errorJSON("The model's provider did not answer in time.", "server_error", "timeout")},
	{flags: []string{"UPE"}, body: errorJSON("The model's provider broke off its answer or sent a broken one.", "server_error", "")},
	{flags: []string{"UF", "URX", "UH", "NC", "UO", "UR", "LR", "UC"},
		body: errorJSON("The model's provider could not be reached.", "server_error", "")},
	{flags: []string{"SI"}, body: errorJSON("The request timed out.", "server_error", "timeout")},
	{status: 413, body: errorJSON(TooLargeMessage, "invalid_request_error", "request_too_large")},
	{status: 408, body: errorJSON("The request was not received in time.", "invalid_request_error", "request_timeout")},
	{status: 500, body: errorJSON(InternalMessage, "server_error", "")},
	{status: 504, body: errorJSON("The gateway timed out while processing the request.", "server_error", "timeout")},
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

// localReplyConfig maps Envoy's local replies to OpenAI errors, each marked
// with routing.LocalReplyHeader. Its first mapper matches the ext_proc server's
// own replies and changes nothing: the first matching mapper wins, and
// without a format of its own or a top-level one the body stays as the
// server wrote it.
func localReplyConfig(namespace string) *hcmv3.LocalReplyConfig {
	ms := []*hcmv3.ResponseMapper{{Filter: gatewayReplyFilter(namespace)}}
	for _, lr := range localReplies {
		ms = append(ms, &hcmv3.ResponseMapper{
			Filter: lr.filter(),
			HeadersToAdd: []*corev3.HeaderValueOption{{
				Header:       &corev3.HeaderValue{Key: routing.LocalReplyHeader, Value: "%RESPONSE_CODE_DETAILS%"},
				AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			}},
			BodyFormatOverride: &corev3.SubstitutionFormatString{
				Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
					Specifier: &corev3.DataSource_InlineString{InlineString: lr.body},
				}},
				ContentType: "application/json",
			},
		})
	}
	return &hcmv3.LocalReplyConfig{Mappers: ms}
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
