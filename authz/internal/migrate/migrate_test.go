package migrate

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		files   []string
		want    []int
		wantErr bool
	}{
		{"ordered by number", []string{"m/0002_b.sql", "m/0010_j.sql", "m/0001_a.sql", "m/0003_c.sql", "m/0004_d.sql",
			"m/0005_e.sql", "m/0006_f.sql", "m/0007_g.sql", "m/0008_h.sql", "m/0009_i.sql", "m/README"},
			[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, false},
		{"none", nil, nil, false},
		{"gap", []string{"m/0001_a.sql", "m/0003_c.sql"}, nil, true},
		{"repeat", []string{"m/0001_a.sql", "m/01_b.sql"}, nil, true},
		{"unnumbered", []string{"m/init.sql"}, nil, true},
		{"zero", []string{"m/0000_a.sql"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tt.files {
				fsys[f] = &fstest.MapFile{Data: []byte("-- " + f)}
			}
			ms, err := Load(fsys, "m")
			if (err != nil) != tt.wantErr {
				t.Fatalf("Load(%v) error = %v, want error %v", tt.files, err, tt.wantErr)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load(%v) versions (-want +got):\n%s", tt.files, diff)
			}
			if len(ms) > 0 && (ms[0].Name != "0001_a" || ms[0].SQL != "-- m/0001_a.sql") {
				t.Errorf("first migration = %+v", ms[0])
			}
		})
	}
}
