package queue

import (
	"reflect"
	"testing"
	"unicode/utf8"

	"modelgate/authz/ledger"
)

// Every string of a usage record is made storable, those added later
// too: one left out (the agent session id once was) failed PostgreSQL
// batches for every account.
func TestSanitizeUsageCoversEveryString(t *testing.T) {
	var r ledger.UsageRecord
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		if v.Field(i).Kind() == reflect.String {
			v.Field(i).SetString("bad\xff\x00")
		}
	}
	sanitizeUsage(&r)
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.String && (!utf8.ValidString(f.String()) || f.String() != "bad\uFFFD\uFFFD") {
			t.Errorf("%s = %q after sanitizeUsage, want %q", v.Type().Field(i).Name, f.String(), "bad\uFFFD\uFFFD")
		}
	}
}
