package envoy

import (
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Names of the access loggers.
const (
	stdoutLoggerName = "envoy.access_loggers.stdout"
	stderrLoggerName = "envoy.access_loggers.stderr"
)

// UsageKeys are the keys of the token usage and routing the ext_proc
// server writes as dynamic metadata in its namespace at the end of each
// routed request; the access log has a field of the same name for each.
var UsageKeys = []string{"model", "backend", "provider", "account_id", "prompt_tokens", "completion_tokens", "total_tokens"}

// AccessLogFields are the access log's JSON fields and the Envoy command
// operators that fill them, besides the UsageKeys from dynamic metadata.
// A single operator keeps its type: numbers stay numbers, and what is
// not there is null (%RESPONSE_FLAGS% is "-" without flags). The path is
// as it went upstream: the ext_proc server rewrites it for the provider.
// The client address is the one use_remote_address and
// xff_num_trusted_hops make Envoy trust.
var AccessLogFields = map[string]string{
	"start_time":            "%START_TIME%",
	"method":                "%REQ(:METHOD)%",
	"path":                  "%REQ(:PATH)%",
	"status":                "%RESPONSE_CODE%",
	"response_code_details": "%RESPONSE_CODE_DETAILS%",
	"response_flags":        "%RESPONSE_FLAGS%",
	"duration_ms":           "%DURATION%",
	"bytes_received":        "%BYTES_RECEIVED%",
	"bytes_sent":            "%BYTES_SENT%",
	"request_id":            "%REQ(X-REQUEST-ID)%",
	"client_address":        "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
	"user_agent":            "%REQ(USER-AGENT)%",
	"route":                 "%ROUTE_NAME%",
	"upstream_cluster":      "%UPSTREAM_CLUSTER%",
}

// accessLogs is the connection manager's access log: one JSON object a
// line on stdout or stderr, written when each request ends (after the
// ext_proc server's last reply, which carries the usage).
func accessLogs(cfg Config) []*accesslogv3.AccessLog {
	fields := map[string]any{}
	for k, v := range AccessLogFields {
		fields[k] = v
	}
	for _, k := range UsageKeys {
		fields[k] = "%DYNAMIC_METADATA(" + cfg.MetadataNamespace + ":" + k + ")%"
	}
	format, err := structpb.NewStruct(fields)
	if err != nil { // cannot happen: strings only
		panic(err)
	}
	lf := &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: format}}
	var name string
	var logger proto.Message
	switch cfg.AccessLog {
	case AccessLogNone:
		return nil
	case AccessLogStderr:
		name, logger = stderrLoggerName, &streamv3.StderrAccessLog{AccessLogFormat: &streamv3.StderrAccessLog_LogFormat{LogFormat: lf}}
	default:
		name, logger = stdoutLoggerName, &streamv3.StdoutAccessLog{AccessLogFormat: &streamv3.StdoutAccessLog_LogFormat{LogFormat: lf}}
	}
	return []*accesslogv3.AccessLog{{Name: name, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(logger)}}}
}
