package config

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The envoy keys of the production bootstrap: their defaults, values
// that pass, and each one's problem at its location.
func TestEnvoyProductionKeys(t *testing.T) {
	cfg, err := Parse([]byte("{}\n"))
	if err != nil {
		t.Fatal(err)
	}
	type keys struct {
		AdminListen, AccessLog string
		MaxRequestsInFlight    int64
		UseRemoteAddress       bool
		XffNumTrustedHops      int64
	}
	got := keys{cfg.Envoy.AdminListen, cfg.Envoy.AccessLog, cfg.Envoy.MaxRequestsInFlight, cfg.Envoy.UseRemoteAddress, cfg.Envoy.XffNumTrustedHops}
	if diff := cmp.Diff(keys{"127.0.0.1:9901", "stdout", 100000, false, 0}, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}

	for _, ok := range []string{
		"envoy: {admin_listen: '0.0.0.0:9901', access_log: stderr, max_requests_in_flight: 1, use_remote_address: true, xff_num_trusted_hops: 2}",
		"envoy: {admin_listen: '[::1]:0', access_log: none, max_requests_in_flight: 4294967295, xff_num_trusted_hops: 4294967295}",
	} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("Parse(%s): %v", ok, err)
		}
	}

	for _, tt := range []struct{ yaml, want string }{
		{"envoy: {admin_listen: 'localhost:9901'}", `envoy.admin_listen: "localhost:9901" must be an IP address and a port, such as 127.0.0.1:9901`},
		{"envoy: {admin_listen: '127.0.0.1'}", `envoy.admin_listen: "127.0.0.1" must be an IP address and a port, such as 127.0.0.1:9901`},
		{"envoy: {admin_listen: '127.0.0.1:65536'}", `envoy.admin_listen: "127.0.0.1:65536" must be an IP address and a port, such as 127.0.0.1:9901`},
		{"envoy: {admin_listen: 9901}", `envoy.admin_listen: want a string, got 9901: quote it`},
		{"envoy: {max_requests_in_flight: -1}", "envoy.max_requests_in_flight: must be between 1 and 4294967295"},
		{"envoy: {max_requests_in_flight: 4294967296}", "envoy.max_requests_in_flight: must be between 1 and 4294967295"},
		{"envoy: {max_requests_in_flight: lots}", `envoy.max_requests_in_flight: want an integer, got "lots"`},
		{"envoy: {access_log: /dev/stdout}", `envoy.access_log: "/dev/stdout" is not stdout, stderr or none`},
		// YAML 1.1 reads a bare off as false.
		{"envoy: {access_log: off}", "envoy.access_log: want a string, got false: quote it"},
		{"envoy: {use_remote_address: yes please}", `envoy.use_remote_address: want true or false, got "yes please"`},
		{"envoy: {xff_num_trusted_hops: -1}", "envoy.xff_num_trusted_hops: must be between 0 and 4294967295"},
		{"envoy: {xff_num_trusted_hops: 4294967296}", "envoy.xff_num_trusted_hops: must be between 0 and 4294967295"},
		{"envoy: {use_remote_adress: true}", `envoy.use_remote_adress: unknown key; did you mean "use_remote_address"?`},
		{"envoy: {max_requests: 10}", `envoy.max_requests: unknown key`},
	} {
		_, err := Parse([]byte(tt.yaml))
		var cerr *Error
		if !errors.As(err, &cerr) {
			t.Errorf("Parse(%s) = %v, want problems", tt.yaml, err)
			continue
		}
		if diff := cmp.Diff([]string{tt.want}, cerr.Problems); diff != "" {
			t.Errorf("Parse(%s) problems (-want +got):\n%s", tt.yaml, diff)
		}
	}
}
