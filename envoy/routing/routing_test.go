package routing

import "testing"

// Host is what Envoy sends as Host upstream: without the scheme's default
// port, which Bedrock's SigV4 signature covers.
func TestHost(t *testing.T) {
	for url, want := range map[string]string{
		"https://bedrock-runtime.us-east-1.amazonaws.com:443": "bedrock-runtime.us-east-1.amazonaws.com",
		"https://bedrock-runtime.us-east-1.amazonaws.com":     "bedrock-runtime.us-east-1.amazonaws.com",
		"http://127.0.0.1:80/base":                            "127.0.0.1",
		"http://127.0.0.1:8000":                               "127.0.0.1:8000",
		"https://[::1]:443":                                   "[::1]",
		"https://example.com:8443":                            "example.com:8443",
	} {
		if got := (Backend{BaseURL: url}).Host(); got != want {
			t.Errorf("Host of %s = %q, want %q", url, got, want)
		}
	}
}

// BasePath is the base URL's path that requests' paths are appended to.
func TestBasePath(t *testing.T) {
	for url, want := range map[string]string{
		"https://api.openai.com":              "",
		"https://api.openai.com/":             "",
		"https://gw.example.com/openai/":      "/openai",
		"http://127.0.0.1:8000/v1%2Fbeta/x":   "/v1%2Fbeta/x",
		"https://example.com:8443/base/path/": "/base/path",
	} {
		if got := (Backend{BaseURL: url}).BasePath(); got != want {
			t.Errorf("BasePath of %s = %q, want %q", url, got, want)
		}
	}
}

// A model's timeouts override its backend's member by member.
func TestTimeoutsOr(t *testing.T) {
	def := Timeouts{ResponseHeaders: 300e9, StreamIdle: 60e9}
	if got := (Timeouts{StreamIdle: 5e9}).Or(def); got != (Timeouts{ResponseHeaders: 300e9, StreamIdle: 5e9}) {
		t.Errorf("Or = %+v", got)
	}
	if got := (Timeouts{}).Or(def); got != def {
		t.Errorf("zero Or = %+v", got)
	}
}
