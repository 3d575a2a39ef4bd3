package sse

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// update lets go test ./translate/... -update run here too; sse has no
// golden files (translatetest, which owns the flag, imports sse).
var _ = flag.Bool("update", false, "rewrite golden files (none in this package)")

func decodeAll(chunks ...[]byte) ([]Event, bool) {
	out, pending, _ := decodeMax(0, chunks...)
	return out, pending
}

func decodeMax(max int, chunks ...[]byte) ([]Event, bool, error) {
	d := Decoder{Max: max}
	var out []Event
	for _, c := range chunks {
		out = append(out, d.Feed(c)...)
	}
	return out, d.Pending(), d.Err()
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
		{"empty data then data", "data\ndata: a\n\n", []Event{{Data: []byte("\na")}}, false},
		{"no data is not dispatched", "event: x\n\n", nil, false},
		{"only one space dropped", "data:  a\n\n", []Event{{Data: []byte(" a")}}, false},
		{"truncated line", "data: a\n\ndata: b", []Event{{Data: []byte("a")}}, true},
		{"truncated event", "data: a\n\ndata: b\n", []Event{{Data: []byte("a")}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bytewise [][]byte
			for i := range len(tt.in) {
				bytewise = append(bytewise, []byte(tt.in[i:i+1]))
			}
			for _, chunks := range [][][]byte{{[]byte(tt.in)}, bytewise} {
				got, pending := decodeAll(chunks...)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%d chunks: events (-want +got):\n%s", len(chunks), diff)
				}
				if pending != tt.wantPending {
					t.Errorf("%d chunks: Pending = %v, want %v", len(chunks), pending, tt.wantPending)
				}
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
	f.Add([]byte("data: 12345\n\ndata: 123456\n\n"), uint64(5<<32|3))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		// The seed's high half sets a small Max for some inputs, so
		// that the limit is reached as often as not.
		max := int(seed>>32) % 64
		whole, wp, werr := decodeMax(max, data)
		r := rand.New(rand.NewPCG(seed, seed))
		got, gp, gerr := decodeMax(max, splitAt(data, randomCuts(r, len(data)))...)
		if diff := cmp.Diff(whole, got); diff != "" || wp != gp || werr != gerr {
			t.Fatalf("split decode differs (-whole +split):\n%s (pending %v vs %v, err %v vs %v)", diff, wp, gp, werr, gerr)
		}
		limit := max
		if limit == 0 {
			limit = DefaultMax
		}
		for _, e := range got {
			if len(e.Data) > limit {
				t.Fatalf("event of %d bytes passed the limit %d", len(e.Data), limit)
			}
		}
	})
}

// A line or an event over Max fails the decoder, however the stream is
// cut; what came before is still decoded, nothing after.
func TestDecoderMax(t *testing.T) {
	tests := []struct {
		name    string
		max     int
		in      string
		want    []Event
		wantErr error
	}{
		{"at the limit", 5, "data: 12345\n\n", []Event{{Data: []byte("12345")}}, nil},
		{"data over", 5, "data: 1\n\ndata:123456\n\ndata: 2\n\n", []Event{{Data: []byte("1")}}, ErrEventTooLarge},
		{"data lines over", 5, "data: 12\ndata: 345\n\n", nil, ErrEventTooLarge},
		{"line at the limit", 5, ": comment\n\ndata:  1234\n\n", []Event{{Data: []byte(" 1234")}}, nil},
		{"line over", 5, "data: 1\n\n: a long comment\n\ndata: 2\n\n", []Event{{Data: []byte("1")}}, ErrEventTooLarge},
		{"cut line over", 5, "data: 1\n\ndata: 123456", []Event{{Data: []byte("1")}}, ErrEventTooLarge},
		{"empty data lines", 4, "data\ndata\ndata\ndata\ndata\n\n", []Event{{Data: []byte("\n\n\n\n")}}, nil},
		{"empty data lines over", 3, "data\ndata\ndata\ndata\ndata\n\n", nil, ErrEventTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, cut := range []int{0, 1, 3, 7} {
				var chunks [][]byte
				if cut == 0 {
					chunks = [][]byte{[]byte(tt.in)}
				} else {
					for in := []byte(tt.in); len(in) > 0; in = in[min(cut, len(in)):] {
						chunks = append(chunks, in[:min(cut, len(in))])
					}
				}
				got, pending, err := decodeMax(tt.max, chunks...)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("cut %d: events (-want +got):\n%s", cut, diff)
				}
				if err != tt.wantErr || pending != (err != nil) {
					t.Errorf("cut %d: Err = %v, Pending = %v; want %v", cut, err, pending, tt.wantErr)
				}
			}
		})
	}
}

// The default limit holds: an event over 16 MiB fails the decoder, which
// then holds no more than the limit and returns no more events.
func TestDecoderDefaultMax(t *testing.T) {
	var d Decoder
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	d.Feed([]byte("data: "))
	n := 0
	for ; d.Err() == nil && n < 2*DefaultMax>>20; n++ {
		if ev := d.Feed(chunk); len(ev) != 0 {
			t.Fatalf("an event before its end: %d bytes", len(ev[0].Data))
		}
	}
	if d.Err() != ErrEventTooLarge {
		t.Fatalf("after %d MiB of one line: Err = %v, want ErrEventTooLarge", n, d.Err())
	}
	if n != DefaultMax>>20+1 {
		t.Errorf("failed after %d MiB, want %d", n, DefaultMax>>20+1)
	}
	if cap(d.buf) != 0 || cap(d.data) != 0 {
		t.Errorf("a failed decoder holds %d bytes", cap(d.buf)+cap(d.data))
	}
	if ev := d.Feed([]byte("\n\ndata: x\n\n")); len(ev) != 0 || !d.Pending() {
		t.Errorf("after the error: %d events, Pending %v", len(ev), d.Pending())
	}
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

// oneBigEvent is one data event of n bytes in 16 KiB chunks.
func oneBigEvent(n int) [][]byte {
	stream := AppendData(nil, bytes.Repeat([]byte("a"), n))
	var chunks [][]byte
	for len(stream) > 0 {
		c := stream[:min(16<<10, len(stream))]
		chunks, stream = append(chunks, c), stream[len(c):]
	}
	return chunks
}

func benchmarkBigEvent(b *testing.B, n int) {
	chunks := oneBigEvent(n)
	b.ReportAllocs()
	b.SetBytes(int64(n))
	for b.Loop() {
		var d Decoder
		got := 0
		for _, c := range chunks {
			for _, e := range d.Feed(c) {
				got += len(e.Data)
			}
		}
		if got != n {
			b.Fatalf("decoded %d bytes", got)
		}
	}
}

func BenchmarkDecoder1MiB(b *testing.B) { benchmarkBigEvent(b, 1<<20) }
func BenchmarkDecoder4MiB(b *testing.B) { benchmarkBigEvent(b, 4<<20) }

// Data with line breaks goes out as one data: line per line and decodes
// back to what went in ("\r\n" and "\r" read as "\n").
func TestAppendDataLineBreaks(t *testing.T) {
	for in, want := range map[string]string{
		"{}":            "{}",
		"{\"a\":\n1}":   "{\"a\":\n1}",
		"[\r\n1,\r2\n]": "[\n1,\n2\n]",
		"\n":            "\n",
		"x\n\ny":        "x\n\ny",
	} {
		out := AppendData(nil, []byte(in))
		var d Decoder
		events := d.Feed(out)
		if len(events) != 1 || string(events[0].Data) != want || d.Pending() {
			t.Errorf("AppendData(%q) = %q, decoded %q; want one event %q", in, out, events, want)
		}
	}
}
