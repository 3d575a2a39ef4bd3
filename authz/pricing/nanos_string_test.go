package pricing

import "testing"

func TestNanosStringCases(t *testing.T) {
	for n, want := range map[Nanos]string{0: "0.00", 2_500_000_000: "2.50", 125000: "0.000125", -1: "-0.000000001", 1: "0.000000001",
		9_007_199_254_740_992: "9007199.254740992", -9_223_372_036_854_775_808: "-9223372036.854775808", 10_000_000_000: "10.00", 3_790_000: "0.00379"} {
		if got := n.String(); got != want {
			t.Errorf("%d: %q, want %q", int64(n), got, want)
		}
	}
}
