package storetest

import (
	"testing"

	"github.com/jackc/pgx/v5"
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
