package storetest

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

func TestWithDatabase(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable": "postgres://postgres@127.0.0.1:5432/mailhook_test_x?sslmode=disable",
		"postgresql://u:p@db/admin":                                   "postgresql://u:p@db/mailhook_test_x",
		"host=127.0.0.1 user=postgres dbname=postgres":                "host=127.0.0.1 user=postgres dbname=postgres dbname=mailhook_test_x",
	} {
		got, err := withDatabase(in, "mailhook_test_x")
		if err != nil || got != want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestNewDatabaseIsDroppedAfterTest(t *testing.T) {
	var dbURL string
	t.Run("uses", func(t *testing.T) {
		dbURL = NewDatabase(t)
	})
	if t.Failed() || dbURL == "" {
		return
	}
	conn, err := connect(t.Context(), AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	var exists bool
	if err := conn.QueryRow(t.Context(),
		`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, cfg.Database).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("test database %s still exists after its test", cfg.Database)
	}
}

// Pool gives a store's test one small pool of its own on the store's database, forgotten and
// closed when that test ends; the store, written through, is read back through it.
func TestPoolIsTheTestsOwnOnTheStoresDatabase(t *testing.T) {
	var s *store.Store
	t.Run("uses", func(t *testing.T) {
		s = Open(t)
		p := Pool(t, s)
		if Pool(t, s) != p {
			t.Fatal("a second Pool call opened another pool")
		}
		if got := p.Config().MaxConns; got != TestPoolMaxConns {
			t.Errorf("MaxConns = %d, want %d", got, TestPoolMaxConns)
		}
		if _, err := Enqueue(t.Context(), s, domain.Event{Provider: "postscale", EventID: "evt_1", Type: "email.delivered",
			Kind: domain.KindStatus, Status: domain.StatusDelivered, MessageID: "msg_1"}); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := p.QueryRow(t.Context(), `SELECT count(*) FROM webhook_events`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("the pool sees %d events (%v), want the one the store wrote", n, err)
		}
	})
	openedMu.Lock()
	_, known := openedBy[s]
	openedMu.Unlock()
	if known {
		t.Error("the store is still remembered after its test ended")
	}
}
