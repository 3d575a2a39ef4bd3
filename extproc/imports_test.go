package extproc_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The server depends on interfaces (Authenticator, UsageRecorder,
// ResponseStore, ImageStore, ratelimit.Limiter), never on a concrete
// store: SQLite, PostgreSQL, Redis and the in-memory limiter are chosen
// by cmd/modelgate. Its tests may use them.
func TestExtprocHasNoConcreteStores(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list found only %v", deps)
	}
	for _, dep := range deps {
		for _, banned := range []string{"modelgate/authz/sqlite", "modelgate/authz/postgres", "modelgate/authz/ledger/queue",
			"modelgate/ratelimit/redis", "modelgate/ratelimit/memory", "database/sql", "github.com/redis/go-redis",
			"github.com/jackc/pgx", "modernc.org/sqlite"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("extproc depends on %s", dep)
			}
		}
	}
}
