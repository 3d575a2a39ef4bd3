package sse

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	_ "modelgate/translate/translatetest" // -update, so go test ./translate/... -update runs here too
)

func decodeAll(chunks ...[]byte) ([]Event, bool) {
	var d Decoder
	var out []Event
	for _, c := range chunks {
		for _, e := range d.Feed(c) {
			out = append(out, e)
		}
	}
	return out, d.Pending()
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		want        []Event
		wantPending bool
	}{
		{"lf", "data: a\n\ndata: b\n\n", []Event{{Data: []byte("a")}, {Data: []byte("b")}}, false},
		{"crlf", "data: a\r\n\r\n", []Event{{Data: []byte("a")}}, false},
		{"cr", "data: a\r\rdata: b\r\r", []Event{{Data: []byte("a")}, {Data: []byte("b")}}, false},
		{"multi-line data", "data: a\ndata:b\n\n", []Event{{Data: []byte("a\nb")}}, false},
		{"typed with id", "event: x\nid: 7\ndata: {}\n\n", []Event{{Type: "x", ID: "7", Data: []byte("{}")}}, false},
		{"comment and empty data", ": ping\n\ndata\n\n", []Event{{Data: []byte{}}}, false},
		{"no data is not dispatched", "event: x\n\n", nil, false},
		{"only one space dropped", "data:  a\n\n", []Event{{Data: []byte(" a")}}, false},
		{"truncated line", "data: a\n\ndata: b", []Event{{Data: []byte("a")}}, true},
		{"truncated event", "data: a\n\ndata: b\n", []Event{{Data: []byte("a")}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, pending := decodeAll([]byte(tt.in))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if pending != tt.wantPending {
				t.Errorf("Pending = %v, want %v", pending, tt.wantPending)
			}
		})
	}
}

func TestDecoderCRLFSplitBetweenCRAndLF(t *testing.T) {
	got, _ := decodeAll([]byte("data: a\r"), []byte("\n\r"), []byte("\ndata: b\r\n\r\n"))
	want := []Event{{Data: []byte("a")}, {Data: []byte("b")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// splitAt cuts b at the given sorted offsets.
func splitAt(b []byte, cuts []int) [][]byte {
	var out [][]byte
	prev := 0
	for _, c := range cuts {
		out = append(out, b[prev:c])
		prev = c
	}
	return append(out, b[prev:])
}

func randomCuts(r *rand.Rand, n int) []int {
	var cuts []int
	for i := 1; i < n; i++ {
		if r.IntN(7) == 0 {
			cuts = append(cuts, i)
		}
	}
	return cuts
}

func TestDecoderRecordedStreamsAnySplit(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/fixtures/*/*.bodies/*.sse")
	gemini, _ := filepath.Glob("../../testdata/fixtures/gemini/*.bodies/*.sse")
	if len(files) < 5 || len(gemini) == 0 {
		t.Fatalf("found %d recorded streams (%d with CRLF); want the copies in testdata/fixtures", len(files), len(gemini))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		whole, pending := decodeAll(data)
		if len(whole) == 0 || pending {
			t.Errorf("%s: %d events, pending %v; want complete events", f, len(whole), pending)
		}
		for range 8 {
			got, _ := decodeAll(splitAt(data, randomCuts(r, len(data)))...)
			if diff := cmp.Diff(whole, got); diff != "" {
				t.Fatalf("%s split: events differ (-whole +split):\n%s", f, diff)
			}
		}
	}
}

func FuzzDecoderSplit(f *testing.F) {
	f.Add([]byte("data: a\r\n\r\ndata: b\n\n"), uint64(3))
	f.Add([]byte("event: x\rdata: ’\r\r"), uint64(9))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		whole, wp := decodeAll(data)
		r := rand.New(rand.NewPCG(seed, seed))
		got, gp := decodeAll(splitAt(data, randomCuts(r, len(data)))...)
		if diff := cmp.Diff(whole, got); diff != "" || wp != gp {
			t.Fatalf("split decode differs (-whole +split):\n%s (pending %v vs %v)", diff, wp, gp)
		}
	})
}

func TestAppend(t *testing.T) {
	got := string(AppendEvent(AppendData(nil, []byte(`{"a":1}`)), "response.created", []byte(`{}`)))
	want := "data: {\"a\":1}\n\nevent: response.created\ndata: {}\n\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func BenchmarkDecoder200Events(b *testing.B) {
	var stream []byte
	for range 200 {
		stream = AppendData(stream, []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" hello"},"finish_reason":null}]}`))
	}
	chunks := splitAt(stream, randomCuts(rand.New(rand.NewPCG(1, 1)), len(stream)/40))
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		var d Decoder
		n := 0
		for _, c := range chunks {
			n += len(d.Feed(c))
		}
		if n != 200 {
			b.Fatalf("decoded %d events", n)
		}
	}
}
