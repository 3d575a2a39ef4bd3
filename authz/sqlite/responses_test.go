package sqlite

import (
	"context"
	"strings"
	"testing"
)

// ResponseOutputs looks each id up by the primary key: a scan of the
// responses of every account, for a request naming many ids, would load
// the store for everyone.
func TestResponseOutputsPlan(t *testing.T) {
	s := openTest(t)
	t.Cleanup(func() { s.Close() })
	rows, err := s.db.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+responseOutputs, `["resp_1","resp_2"]`, "acct", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "SEARCH responses USING INDEX sqlite_autoindex_responses_1 (id=?)") || strings.Contains(text, "SCAN responses") {
		t.Errorf("query plan:\n%s\nwant a search of responses by its primary key", text)
	}
}
