package envoytest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"modelgate/envoy/standin"
)

// operatorRE is a format value that is exactly one command operator, as
// the generated json_format has them (envoy.AccessLogFields).
var operatorRE = regexp.MustCompile(`^%([A-Z_]+)(?:\(([^)]*)\))?%$`)

// ParseAccessLogLine reads one line of a real Envoy's JSON access log into
// the Entry the stand-in would have handed over: format is the access
// log's json_format (field name to value, such as "status":
// "%RESPONSE_CODE%"), and each field whose value is one operator the Entry
// has fills that: %RESPONSE_CODE%, %RESPONSE_CODE_DETAILS%,
// %RESPONSE_FLAGS% (without its "-" placeholder), %ROUTE_NAME%,
// %UPSTREAM_CLUSTER%, %UPSTREAM_HOST%, %UPSTREAM_REQUEST_ATTEMPT_COUNT%,
// %DYNAMIC_METADATA(ns:key)% (into Metadata[ns][key], typed as JSON
// decodes it, as the stand-in's structpb values are), %START_TIME%,
// %DURATION%, %BYTES_RECEIVED%, %BYTES_SENT%,
// %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% and %REQ(:METHOD)%. Line is
// the line. Path stays empty: %REQ(:PATH)% is the path as it went
// upstream, the stand-in's Path the client's. A null value leaves its
// field zero. Envoy's details differ from the stand-in's in one way: an
// answer from upstream has "via_upstream", where the stand-in has none.
func ParseAccessLogLine(format map[string]string, line []byte) (standin.Entry, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return standin.Entry{}, fmt.Errorf("access log line %q: %w", line, err)
	}
	e := standin.Entry{Line: string(line)}
	for key, value := range format {
		raw, ok := fields[key]
		if !ok || string(raw) == "null" {
			continue
		}
		m := operatorRE.FindStringSubmatch(value)
		if m == nil {
			continue // plain text
		}
		if err := setField(&e, m[1], m[2], raw); err != nil {
			return standin.Entry{}, fmt.Errorf("access log field %q (%s) in %q: %w", key, value, line, err)
		}
	}
	return e, nil
}

// setField sets the field of e that operator op(arg) fills from its
// JSON value raw.
func setField(e *standin.Entry, op, arg string, raw json.RawMessage) error {
	str := func(dst *string) error { return json.Unmarshal(raw, dst) }
	switch op {
	case "RESPONSE_CODE":
		return json.Unmarshal(raw, &e.Status)
	case "RESPONSE_CODE_DETAILS":
		return str(&e.Details)
	case "RESPONSE_FLAGS":
		if err := str(&e.Flags); err != nil {
			return err
		}
		if e.Flags == "-" {
			e.Flags = ""
		}
	case "ROUTE_NAME":
		return str(&e.Route)
	case "UPSTREAM_CLUSTER":
		return str(&e.Cluster)
	case "UPSTREAM_HOST":
		return str(&e.UpstreamHost)
	case "UPSTREAM_REQUEST_ATTEMPT_COUNT":
		return json.Unmarshal(raw, &e.Attempts)
	case "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT":
		return str(&e.ClientAddress)
	case "REQ":
		if strings.EqualFold(arg, ":METHOD") {
			return str(&e.Method)
		}
	case "START_TIME":
		var s string
		if err := str(&s); err != nil {
			return err
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return err
		}
		e.StartTime = t
	case "DURATION":
		var ms int64
		if err := json.Unmarshal(raw, &ms); err != nil {
			return err
		}
		e.Duration = time.Duration(ms) * time.Millisecond
	case "BYTES_RECEIVED":
		return json.Unmarshal(raw, &e.BytesReceived)
	case "BYTES_SENT":
		return json.Unmarshal(raw, &e.BytesSent)
	case "DYNAMIC_METADATA":
		ns, key, ok := strings.Cut(arg, ":")
		if !ok || strings.Contains(key, ":") {
			return nil // a path into a value: not what the stand-in gives
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		if e.Metadata == nil {
			e.Metadata = map[string]map[string]any{}
		}
		if e.Metadata[ns] == nil {
			e.Metadata[ns] = map[string]any{}
		}
		e.Metadata[ns][key] = v
	}
	return nil
}
