package standin

import (
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// accessLogConfig is the connection manager's one access log: a JSON
// format written to stdout or stderr.
type accessLogConfig struct {
	mu     sync.Mutex // one line at a time
	out    io.Writer
	fields map[string]operator
}

func (c *accessLogConfig) write(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.out, line+"\n") //nolint:errcheck // as Envoy, the log does not fail requests
}

// operator is one format value: a single command operator, or a literal.
type operator struct {
	name    string // START_TIME, REQ, DYNAMIC_METADATA, ...; "" for a literal
	arg     string // REQ's header names ("a?b"), DYNAMIC_METADATA's "ns:key"
	literal string
}

// commandOperator is a value that is exactly one operator, with an
// argument in parentheses and no length limit.
var commandOperator = regexp.MustCompile(`^%([A-Z_]+)(?:\(([^)]*)\))?%$`)

// accessLogOperators are the operators the stand-in renders, and whether
// each takes an argument.
var accessLogOperators = map[string]bool{
	"START_TIME": false, "REQ": true, "RESPONSE_CODE": false, "RESPONSE_CODE_DETAILS": false, "RESPONSE_FLAGS": false,
	"DURATION": false, "BYTES_RECEIVED": false, "BYTES_SENT": false, "ROUTE_NAME": false, "UPSTREAM_CLUSTER": false,
	"DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT": false, "DYNAMIC_METADATA": true,
}

func compileAccessLog(logs []*accesslogv3.AccessLog) (*accessLogConfig, error) {
	switch {
	case len(logs) == 0:
		return nil, nil
	case len(logs) > 1:
		return nil, unsupported("more than one access log")
	case logs[0].GetFilter() != nil:
		return nil, unsupported("access log filters")
	}
	stdout, stderr := &streamv3.StdoutAccessLog{}, &streamv3.StderrAccessLog{}
	cfg := &accessLogConfig{fields: map[string]operator{}}
	var format *structpb.Struct
	switch a := logs[0].GetTypedConfig(); {
	case a != nil && a.UnmarshalTo(stdout) == nil:
		cfg.out, format = os.Stdout, stdout.GetLogFormat().GetJsonFormat()
		if extra := extraFields(stdout.GetLogFormat(), "json_format"); len(extra) > 0 {
			return nil, unsupported("access log format %v", extra)
		}
	case a != nil && a.UnmarshalTo(stderr) == nil:
		cfg.out, format = os.Stderr, stderr.GetLogFormat().GetJsonFormat()
		if extra := extraFields(stderr.GetLogFormat(), "json_format"); len(extra) > 0 {
			return nil, unsupported("access log format %v", extra)
		}
	default:
		return nil, unsupported("access log %q: only the stdout and stderr loggers are implemented", logs[0].GetName())
	}
	if format == nil {
		return nil, unsupported("access log without a json_format")
	}
	for k, v := range format.GetFields() {
		s, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, unsupported("access log field %q: only string values", k)
		}
		op, err := parseOperator(s.StringValue)
		if err != nil {
			return nil, err
		}
		cfg.fields[k] = op
	}
	return cfg, nil
}

func parseOperator(s string) (operator, error) {
	if !strings.Contains(s, "%") {
		return operator{literal: s}, nil
	}
	m := commandOperator.FindStringSubmatch(s)
	if m == nil {
		return operator{}, unsupported("access log value %q: one command operator a value, or plain text", s)
	}
	takesArg, known := accessLogOperators[m[1]]
	if !known || takesArg != (m[2] != "") {
		return operator{}, unsupported("access log operator %q", s)
	}
	if m[1] == "DYNAMIC_METADATA" && strings.Count(m[2], ":") != 1 {
		return operator{}, unsupported("access log operator %q: DYNAMIC_METADATA(namespace:key) only", s)
	}
	return operator{name: m[1], arg: m[2]}, nil
}

// logLine renders the entry as Envoy's JSON format would: one operator
// keeps its type, and what is not there is null.
func (c *accessLogConfig) logLine(x *exchange, e Entry) []byte {
	out := make(map[string]any, len(c.fields))
	for k, op := range c.fields {
		out[k] = op.value(x, e)
	}
	line, err := json.Marshal(out)
	if err != nil { // strings, numbers and metadata values only
		panic(err)
	}
	return line
}

func (op operator) value(x *exchange, e Entry) any {
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	switch op.name {
	case "":
		return op.literal
	case "START_TIME":
		return e.StartTime.UTC().Format("2006-01-02T15:04:05.000Z")
	case "REQ":
		for _, name := range strings.Split(op.arg, "?") {
			if v, ok := x.headers.get(strings.ToLower(name)); ok {
				return v
			}
		}
		return nil
	case "RESPONSE_CODE":
		return e.Status
	case "RESPONSE_CODE_DETAILS":
		return orNull(e.Details)
	case "RESPONSE_FLAGS":
		if e.Flags == "" {
			return "-"
		}
		return e.Flags
	case "DURATION":
		return e.Duration.Milliseconds()
	case "BYTES_RECEIVED":
		return e.BytesReceived
	case "BYTES_SENT":
		return e.BytesSent
	case "ROUTE_NAME":
		return orNull(e.Route)
	case "UPSTREAM_CLUSTER":
		return orNull(e.Cluster)
	case "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT":
		return orNull(e.ClientAddress)
	case "DYNAMIC_METADATA":
		ns, key, _ := strings.Cut(op.arg, ":")
		if v, ok := e.Metadata[ns][key]; ok {
			return v
		}
	}
	return nil
}
