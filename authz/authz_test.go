package authz_test

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
)

func TestEffectiveModels(t *testing.T) {
	tests := []struct {
		name     string
		levels   [][]string
		want     []string
		wantNone bool
	}{
		{"no levels", nil, nil, false},
		{"all empty", [][]string{nil, {}, nil}, nil, false},
		{"one level", [][]string{nil, {"a", "b"}, nil}, []string{"a", "b"}, false},
		{"intersection in the first restricting level's order", [][]string{{"c", "b", "x"}, {"a", "b", "c"}, {"b", "c", "d"}}, []string{"c", "b"}, false},
		{"disjoint", [][]string{{"a"}, nil, {"b"}}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, none := authz.EffectiveModels(tt.levels...)
			if diff := cmp.Diff(tt.want, got); diff != "" || none != tt.wantNone {
				t.Errorf("EffectiveModels(%v) none = %v, want %v; models (-want +got):\n%s", tt.levels, none, tt.wantNone, diff)
			}
		})
	}
}

func TestUnionNames(t *testing.T) {
	tests := []struct {
		name   string
		levels [][]string
		want   []string
	}{
		{"no levels", nil, nil},
		{"all empty", [][]string{nil, {}, nil}, nil},
		{"one level", [][]string{nil, {"pii", "secrets"}, nil}, []string{"pii", "secrets"}},
		{"group's, account's, key's, each once", [][]string{{"b", "a"}, {"c", "a"}, {"d", "b", "c"}}, []string{"b", "a", "c", "d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, authz.UnionNames(tt.levels...)); diff != "" {
				t.Errorf("UnionNames(%v) (-want +got):\n%s", tt.levels, diff)
			}
		})
	}
}

func TestCleanGuardrails(t *testing.T) {
	got, err := authz.CleanGuardrails([]string{" pii ", "no secrets", "pii", strings.Repeat("é", 100)})
	if want := []string{"pii", "no secrets", strings.Repeat("é", 100)}; err != nil || !cmp.Equal(want, got) {
		t.Errorf("CleanGuardrails = %q, %v; want %q, trimmed, in order, each once", got, err, want)
	}
	if got, err := authz.CleanGuardrails(nil); got != nil || err != nil {
		t.Errorf("CleanGuardrails(nil) = %q, %v", got, err)
	}
	for _, bad := range []string{"", " ", strings.Repeat("x", 101), "a\nb", "a\x00b", "a,b"} {
		if _, err := authz.CleanGuardrails([]string{"ok", bad}); err == nil {
			t.Errorf("CleanGuardrails(%q) accepted it", bad)
		}
	}
}

func TestLimitsOr(t *testing.T) {
	account := authz.Limits{RequestsPerMinute: new(int64(10)), TokensPerDay: new(int64(0))}
	group := authz.Limits{RequestsPerMinute: new(int64(100)), TokensPerMinute: new(int64(1000)), TokensPerDay: new(int64(5000))}
	want := authz.Limits{RequestsPerMinute: new(int64(10)), TokensPerMinute: new(int64(1000)), TokensPerDay: new(int64(0))}
	if diff := cmp.Diff(want, account.Or(group)); diff != "" {
		t.Errorf("account.Or(group) (-want +got):\n%s", diff)
	}
}

func TestAllowsNoModels(t *testing.T) {
	p := &authz.Principal{NoModels: true}
	if p.Allows("gpt-4o") {
		t.Error("a principal with NoModels allows gpt-4o")
	}
	if !(&authz.Principal{}).Allows("gpt-4o") {
		t.Error("a principal without restrictions does not allow gpt-4o")
	}
}

func TestHashKey(t *testing.T) {
	for _, n := range []int{0, 20, 49, 256, 257, 1000} {
		s := strings.Repeat("k", n)
		if got, want := authz.HashKey(s), sha256.Sum256([]byte(s)); got != want {
			t.Errorf("HashKey(%d bytes) = %x, want %x", n, got, want)
		}
	}
}
