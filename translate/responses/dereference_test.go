package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate/api"
)

func TestResponseOfItem(t *testing.T) {
	const hex = "5a240f71fd349feebcace5e9c9bd7862357bf61c0518f5bf"
	for id, want := range map[string]string{
		"rs_" + hex:         "resp_" + hex,
		"msg_" + hex:        "resp_" + hex,
		"fc_" + hex + "_2":  "resp_" + hex,
		"ctc_" + hex + "_0": "resp_" + hex,
		"fco_" + hex:        "", // an input item's id: stored by the gateway, not named after a response
		"rs_abc-def":        "",
		"rs_":               "",
		"msg_XYZ":           "",
		"item_" + hex:       "",
		"":                  "",
	} {
		if got := ResponseOfItem(id); got != want {
			t.Errorf("ResponseOfItem(%q) = %q, want %q", id, got, want)
		}
	}
}

// References to items the input or the continued conversation holds stay
// (the translator copies or drops them); the others are looked up in one
// call, each id once, and replaced by what it finds, or stay when it
// finds none.
func TestDereference(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model":"m","input":[{"type":"message","id":"msg_in","role":"user","content":"hi"},` +
		`{"type":"item_reference","id":"msg_in"},{"type":"item_reference","id":"msg_old"},{"type":"item_reference","id":"rs_known"},` +
		`{"type":"item_reference","id":"rs_unknown"},{"type":"item_reference","id":"rs_known"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var asked [][]string
	history := []json.RawMessage{json.RawMessage(`{"type":"message","id":"msg_old","role":"user","content":"earlier"}`)}
	err = r.Dereference(history, func(ids []string) (map[string]json.RawMessage, error) {
		asked = append(asked, ids)
		return map[string]json.RawMessage{"rs_known": json.RawMessage(`{"type":"reasoning","id":"rs_known","summary":[]}`)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"message","id":"msg_in","role":"user","content":"hi"},{"type":"item_reference","id":"msg_in"},{"type":"item_reference","id":"msg_old"},` +
		`{"type":"reasoning","id":"rs_known","summary":[]},{"type":"item_reference","id":"rs_unknown"},{"type":"reasoning","id":"rs_known","summary":[]}]`
	if got := string(r.Members["input"]); got != want {
		t.Errorf("input %s\nwant  %s", got, want)
	}
	if diff := cmp.Diff([][]string{{"rs_known", "rs_unknown"}}, asked); diff != "" {
		t.Errorf("lookups (-want +got): one, of the two references neither the input nor the history holds\n%s", diff)
	}
}

// Nothing to look up is no lookup.
func TestDereferenceNothingToFind(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","input":[{"type":"message","id":"msg_1","role":"user","content":"hi"},{"type":"item_reference","id":"msg_1"}]}`,
	} {
		r, err := ParseRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		err = r.Dereference(nil, func(ids []string) (map[string]json.RawMessage, error) {
			t.Errorf("%s: looked up %v", body, ids)
			return nil, nil
		})
		if err != nil {
			t.Error(err)
		}
	}
}

// A store that fails fails the request, rather than calling the item
// unknown.
func TestDereferenceStoreError(t *testing.T) {
	r, _ := ParseRequest([]byte(`{"model":"m","input":[{"type":"item_reference","id":"rs_1"}]}`))
	failed := errors.New("store down")
	if err := r.Dereference(nil, func([]string) (map[string]json.RawMessage, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Errorf("Dereference = %v, want the store's error", err)
	}
}

// A request may reference at most 10000 distinct items; the same id
// twice counts once, and items of other types do not count.
func TestParseRequestLimitsItemReferences(t *testing.T) {
	input := func(distinct, times int) string {
		var items []string
		for range times {
			for i := range distinct {
				items = append(items, fmt.Sprintf(`{"type":"item_reference","id":"rs_%x"}`, i))
			}
		}
		items = append(items, `{"type":"message","id":"msg_1","role":"user","content":"item_reference"}`)
		return `{"model":"m","input":[` + strings.Join(items, ",") + `]}`
	}
	for _, tt := range []struct {
		name            string
		distinct, times int
		refused         bool
	}{
		{"at the limit", 10000, 1, false},
		{"at the limit, each twice", 10000, 2, false},
		{"over the limit", 10001, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(input(tt.distinct, tt.times)))
			var re *api.RequestError
			switch {
			case !tt.refused && err != nil:
				t.Errorf("%d distinct references: error %v, want none", tt.distinct, err)
			case tt.refused && (!errors.As(err, &re) || re.Param != "input" || re.Code != "invalid_value" || !strings.Contains(re.Message, "10000")):
				t.Errorf("%d distinct references: error %v, want invalid_value on input naming the limit", tt.distinct, err)
			}
		})
	}
}

// A reference is a copy of the item it names: naming a large item again
// and again, from the store or from the request itself, is refused with a
// 400 once the copies pass MaxResolvedInput, before they are made, rather
// than growing a request of kilobytes into gigabytes of the gateway's
// memory.
func TestReferencesBoundedInBytes(t *testing.T) {
	big := `{"type":"message","id":"msg_big","role":"user","content":[{"type":"input_text","text":"` + strings.Repeat("x", 100<<10) + `"}]}`
	refs := strings.Repeat(`,{"type":"item_reference","id":"msg_big"}`, MaxResolvedInput/(100<<10)+10)
	t.Run("stored", func(t *testing.T) {
		r, err := ParseRequest([]byte(`{"model":"m","input":[` + refs[1:] + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		err = r.Dereference(nil, func([]string) (map[string]json.RawMessage, error) {
			return map[string]json.RawMessage{"msg_big": json.RawMessage(big)}, nil
		})
		var re *api.RequestError
		if !errors.As(err, &re) || re.Param != "input" || len(r.Members["input"]) > 1<<20 {
			t.Errorf("Dereference = %v (input now %d bytes), want a 400 on input", err, len(r.Members["input"]))
		}
	})
	t.Run("in the request", func(t *testing.T) {
		r, err := ParseRequest([]byte(`{"model":"m","input":[` + big + refs + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = ToChat(r, nil)
		var re *api.RequestError
		if !errors.As(err, &re) || re.Param != "input" {
			t.Errorf("ToChat = %v, want a 400 on input", err)
		}
	})
}
