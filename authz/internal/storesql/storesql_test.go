package storesql

import (
	"math"
	"math/big"
	"testing"
	"time"
)

// exact is high·2^32 + lo, or the int64 bound it passes.
func exact(high, lo int64) int64 {
	var n big.Int
	n.Lsh(big.NewInt(high), 32).Add(&n, big.NewInt(lo))
	switch {
	case n.IsInt64():
		return n.Int64()
	case n.Sign() > 0:
		return math.MaxInt64
	default:
		return math.MinInt64
	}
}

// The halves of a Sum add back to the sum, exactly, or to the int64
// bound it passes, in either order of Scan.
func FuzzSumDest(f *testing.F) {
	for _, v := range [][2]int64{{0, 0}, {1, 0}, {0, 1 << 32}, {-1, 1<<32 - 1}, {math.MaxInt64 >> 32, 1<<32 - 1},
		{math.MaxInt64 >> 32, 1 << 32}, {math.MinInt64 >> 32, 0}, {math.MinInt64>>32 - 1, 1 << 32}, {math.MaxInt64, math.MaxInt64},
		{math.MinInt64, math.MaxInt64}, {math.MinInt64, math.MinInt64}, {3 << 30, 0}, {-3 << 30, 0}} {
		f.Add(v[0], v[1])
	}
	f.Fuzz(func(t *testing.T, high, lo int64) {
		want := exact(high, lo)
		for _, hiFirst := range []bool{true, false} {
			var n int64
			dest := SumDest(&n, 1)
			order := []int{0, 1}
			if !hiFirst {
				order = []int{1, 0}
			}
			for _, i := range order {
				if err := dest[i].(half).Scan([...]int64{high, lo}[i]); err != nil {
					t.Fatal(err)
				}
			}
			if n != want {
				t.Fatalf("halves %d, %d: sum %d, want %d", high, lo, n, want)
			}
		}
	})
}

// The values a Sum arrives as: SQLite's integers, PostgreSQL's numeric
// text; milliseconds into a Duration saturate.
func TestSumDest(t *testing.T) {
	for _, tt := range []struct {
		name      string
		high, lo  any
		unit      int64
		want      int64
		wantError bool
	}{
		{"integers", int64(2), int64(5), 1, 2<<32 + 5, false},
		{"numeric text", "3", []byte("4294967301"), 1, 3<<32 + 4294967301, false},
		{"numeric text beyond 2^63", "2147483648", "0", 1, math.MaxInt64, false},
		{"negative text", "-3221225472", "0", 1, math.MinInt64, false},
		{"milliseconds", int64(0), int64(1500), int64(time.Millisecond), int64(1500 * time.Millisecond), false},
		{"milliseconds beyond a Duration", int64(0), int64(math.MaxInt64 / 1000), int64(time.Millisecond), math.MaxInt64, false},
		{"not a number", "x", int64(0), 1, 0, true},
		{"a float", 1.5, int64(0), 1, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var n int64
			dest := SumDest(&n, tt.unit)
			err := dest[0].(half).Scan(tt.high)
			if err == nil {
				err = dest[1].(half).Scan(tt.lo)
			}
			if (err != nil) != tt.wantError {
				t.Fatalf("Scan(%v, %v): error %v, want error %v", tt.high, tt.lo, err, tt.wantError)
			}
			if !tt.wantError && n != tt.want {
				t.Errorf("Scan(%v, %v) = %d, want %d", tt.high, tt.lo, n, tt.want)
			}
		})
	}
}
