package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"modelgate/authz"
	"modelgate/authz/ledger"
)

// Captures tests ledger.CaptureStore.
func Captures[S ledger.CaptureStore](t *testing.T, newStore func(t *testing.T) S) {
	run(t, newStore,
		test[S]{"Captures", testCaptures[S]},
		test[S]{"CapturesBatch", testCapturesBatch[S]},
		test[S]{"CapturesLargeBatch", testCapturesLargeBatch[S]},
		test[S]{"CapturesSanitized", testCapturesSanitized[S]},
		test[S]{"CapturesAllOrNone", testCapturesAllOrNone[S]},
		test[S]{"CapturesRetriedWhole", testCapturesRetriedWhole[S]},
	)
}

var captureAt = time.UnixMilli(1_800_000_000_000).UTC()

// newCapture is a capture of request id at captureAt plus i ms.
func newCapture(id string, i int) ledger.Capture {
	return ledger.Capture{RequestID: id, AccountID: "acct", KeyID: "key", Endpoint: "chat.completions", Model: "m",
		Status: 200, At: captureAt.Add(time.Duration(i) * time.Millisecond),
		Request:  fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"question %d"}]}`, i),
		Response: fmt.Sprintf("data: answer %d\n\n", i), ResponseTruncated: i%2 == 1}
}

func saveCaptures[S ledger.CaptureStore](t *testing.T, s S, cs ...ledger.Capture) {
	t.Helper()
	if err := s.SaveCaptures(context.Background(), cs); err != nil {
		t.Fatalf("SaveCaptures(%d captures): %v", len(cs), err)
	}
}

// wantCaptures checks that CaptureOf finds each of cs as it is.
func wantCaptures[S ledger.CaptureStore](t *testing.T, s S, cs ...ledger.Capture) {
	t.Helper()
	for _, want := range cs {
		got, err := s.CaptureOf(context.Background(), want.RequestID)
		if err != nil {
			t.Errorf("CaptureOf(%q): %v", want.RequestID, err)
		} else if d := cmp.Diff(want, got); d != "" {
			t.Errorf("CaptureOf(%q) (-want +got):\n%s", want.RequestID, d)
		}
	}
}

// wantNoCaptures checks that CaptureOf finds none of cs' requests.
func wantNoCaptures[S ledger.CaptureStore](t *testing.T, s S, cs ...ledger.Capture) {
	t.Helper()
	for _, c := range cs {
		if got, err := s.CaptureOf(context.Background(), c.RequestID); !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("CaptureOf(%q) = %.80v, %v; want ErrNotFound", c.RequestID, got, err)
		}
	}
}

// countCaptures deletes every capture and returns how many there were:
// how many rows a store keeps, which CaptureOf does not tell.
func countCaptures[S ledger.CaptureStore](t *testing.T, s S) int64 {
	t.Helper()
	n, err := s.DeleteCapturesBefore(context.Background(), captureAt.Add(time.Hour), 1<<20)
	if err != nil {
		t.Fatalf("DeleteCapturesBefore: %v", err)
	}
	return n
}

// testCaptures: a capture is kept and found by its request, and goes with
// retention.
func testCaptures[S ledger.CaptureStore](t *testing.T, s S) {
	ctx := context.Background()
	c := ledger.Capture{RequestID: "req-1", AccountID: "acct", KeyID: "key", Endpoint: "chat.completions", Model: "m", Status: 200,
		At: captureAt, Request: `{"a":1}`, Response: "data: x", ResponseTruncated: true}
	saveCaptures(t, s, c)
	wantCaptures(t, s, c)
	if _, err := s.CaptureOf(ctx, "req-2"); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("no capture: %v", err)
	}
	if n, err := s.DeleteCapturesBefore(ctx, captureAt.Add(time.Millisecond), 10); err != nil || n != 1 {
		t.Errorf("retention: %d, %v", n, err)
	}
	wantNoCaptures(t, s, c)
}

// testCapturesBatch: every capture of a batch is kept; an empty batch is
// nothing to do; retention goes oldest first, at most its limit at once.
func testCapturesBatch[S ledger.CaptureStore](t *testing.T, s S) {
	var batch []ledger.Capture
	for i := range 5 {
		c := newCapture(fmt.Sprintf("req-%d", i), i)
		c.AccountID, c.KeyID, c.Status, c.RequestTruncated = fmt.Sprintf("acct-%d", i), "", 200+i, i == 0
		batch = append(batch, c)
	}
	saveCaptures(t, s)
	saveCaptures(t, s, []ledger.Capture{}...)
	saveCaptures(t, s, batch...)
	wantCaptures(t, s, batch...)
	if n, err := s.DeleteCapturesBefore(context.Background(), captureAt.Add(time.Hour), 2); err != nil || n != 2 {
		t.Errorf("retention of 2: %d, %v", n, err)
	}
	wantNoCaptures(t, s, batch[:2]...)
	wantCaptures(t, s, batch[2:]...)
}

// testCapturesLargeBatch: a batch far larger than the capture writer's,
// some of its captures with two bodies of 64 KiB (the default
// observability.capture.max_bytes), is kept whole.
func testCapturesLargeBatch[S ledger.CaptureStore](t *testing.T, s S) {
	var batch []ledger.Capture
	for i := range 1000 {
		c := newCapture(fmt.Sprintf("req-%04d", i), i)
		if i%16 == 0 {
			c.Request = `{"content":"` + repeatTo(fmt.Sprintf("word%d ", i), 64<<10-14) + `"}`
			c.Response = repeatTo("data: {}\n\n", 64<<10)
		}
		batch = append(batch, c)
	}
	saveCaptures(t, s, batch...)
	wantCaptures(t, s, batch...)
	if n := countCaptures(t, s); n != int64(len(batch)) {
		t.Errorf("%d captures kept, want %d", n, len(batch))
	}
}

// repeatTo repeats s up to n bytes.
func repeatTo(s string, n int) string {
	return strings.Repeat(s, n/len(s)+1)[:n]
}

// testCapturesSanitized: what the capture writer makes of bytes a store
// could refuse (invalid UTF-8 and NUL, each a U+FFFD), and other text SQL
// must not mangle, is kept exactly, in every string.
func testCapturesSanitized[S ledger.CaptureStore](t *testing.T, s S) {
	texts := []string{
		"bad\uFFFD\uFFFDs",   // "bad\xff\x00s" sanitized
		"\uFFFD",             // a lone "\x00"
		"\uFFFD\uFFFD\uFFFD", // a cut multi-byte sequence and two NULs
		`quote ' double " backslash \ percent % underscore _ ? $1 :name`,
		"'); DROP TABLE captures; --",
		"lines\r\n\ttabs\u2028\u2029 and \U0001F600 beyond the BMP",
	}
	var batch []ledger.Capture
	for i, text := range texts {
		c := newCapture(fmt.Sprintf("req-%d-%s", i, text), i)
		c.AccountID, c.KeyID, c.Endpoint, c.Model = text, text, text, text
		c.Request, c.Response = `{"content":"`+text+`"}`, "data: "+text+"\n\n"
		batch = append(batch, c)
	}
	saveCaptures(t, s, batch...)
	wantCaptures(t, s, batch...)
}

// testCapturesAllOrNone: a batch with a capture a store may refuse for
// its content (raw invalid UTF-8 or NUL, which PostgreSQL's text cannot
// hold; a status out of its integer's range) is kept whole, exactly, or
// refused whole, with an error that is ErrRefused. Then the batch the
// writer would retry, sanitized, is kept, each capture once.
func testCapturesAllOrNone[S ledger.CaptureStore](t *testing.T, s S) {
	for name, spoil := range map[string]func(*ledger.Capture){
		"invalid UTF-8 in a body": func(c *ledger.Capture) { c.Request = `{"content":"bad` + "\xff\xfe" + `"}` },
		"NUL in a body":           func(c *ledger.Capture) { c.Response = "data: \x00\n\n" },
		"NUL in a model":          func(c *ledger.Capture) { c.Model = "m\x00" },
		"status out of range":     func(c *ledger.Capture) { c.Status = int(int64(1) << 40) },
	} {
		t.Run(name, func(t *testing.T) {
			var batch []ledger.Capture
			for i := range 3 {
				batch = append(batch, newCapture(fmt.Sprintf("req-%s-%d", name, i), i))
			}
			clean := batch[1]
			spoil(&batch[1])
			err := s.SaveCaptures(context.Background(), batch)
			switch {
			case err == nil:
				wantCaptures(t, s, batch...)
			case errors.Is(err, ledger.ErrRefused):
				wantNoCaptures(t, s, batch...)
				batch[1] = clean
				saveCaptures(t, s, batch...)
				wantCaptures(t, s, batch...)
			default:
				t.Fatalf("SaveCaptures of a batch with %s = %v, want nil or ErrRefused", name, err)
			}
		})
	}
	if n := countCaptures(t, s); n != 4*3 {
		t.Errorf("%d captures kept, want %d", n, 4*3)
	}
}

// testCapturesRetriedWhole: a batch that failed stored nothing, so it is
// written again whole; a batch written again (its reply lost) stores
// nothing twice; a store keeps the first capture of a request, also of
// two in one batch.
func testCapturesRetriedWhole[S ledger.CaptureStore](t *testing.T, s S) {
	var batch []ledger.Capture
	for i := range 4 {
		batch = append(batch, newCapture(fmt.Sprintf("req-%d", i), i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.SaveCaptures(ctx, batch); err == nil {
		t.Error("SaveCaptures with a cancelled context succeeded")
	}
	wantNoCaptures(t, s, batch...)
	saveCaptures(t, s, batch...)
	saveCaptures(t, s, batch...)
	wantCaptures(t, s, batch...)

	again := newCapture("req-0", 10) // a request with a capture already
	first, second := newCapture("req-4", 4), newCapture("req-4", 5)
	saveCaptures(t, s, again, first, second)
	wantCaptures(t, s, batch[0], first)
	if n := countCaptures(t, s); n != 5 {
		t.Errorf("%d captures kept, want 5: one a request", n)
	}
}
