package guards_test

import (
	"regexp"
	"testing"
)

// The Lakera Guard emulator flags messages matching Flagged, with a
// request UUID, and refuses a request without a bearer key (401) or
// without its messages, or with a role it does not know (400).
func TestLakera(t *testing.T) {
	type answer struct {
		Flagged  *bool
		Metadata struct {
			RequestUUID string `json:"request_uuid"`
		}
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for _, tt := range []struct {
		name, body string
		noKey      bool
		status     int
		flagged    bool
	}{
		{"clean", `{"messages":[{"role":"user","content":"hello"}]}`, false, 200, false},
		{"flagged", `{"messages":[{"role":"system","content":"hi"},{"role":"assistant","content":"zebra-42"}],"project_id":"p"}`, false, 200, true},
		{"no messages", `{"messages":[]}`, false, 400, false},
		{"unknown role", `{"messages":[{"role":"robot","content":"hello"}]}`, false, 400, false},
		{"not JSON", `{`, false, 400, false},
		{"no key", `{"messages":[{"role":"user","content":"hello"}]}`, true, 401, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			header := bearer()
			if tt.noKey {
				header = nil
			}
			var got answer
			status, b := post(t, "/v2/guard", header, tt.body)
			checkStatus(t, status, tt.status, b, &got)
			if status != 200 {
				return
			}
			if got.Flagged == nil || *got.Flagged != tt.flagged || !uuid.MatchString(got.Metadata.RequestUUID) {
				t.Errorf("answer %s, want flagged %v and a request UUID", b, tt.flagged)
			}
		})
	}
}
