package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// Writable passes on a database that takes writes, and fails on one that answers read-only (as
// a standby not yet promoted does, where a ping passes) with an error the steps read as an
// outage: the gate must not open while every write would still fail.
func TestWritableFailsWhileThePostgreSQLIsReadOnly(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s, err := store.Open(t.Context(), dbURL, store.Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Writable(t.Context()))

	conn := storetest.NewPool(t, dbURL)
	var name string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&name))
	_, err = conn.Exec(t.Context(), `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET default_transaction_read_only = on`)
	require.NoError(t, err)
	require.NoError(t, s.Ping(t.Context()), "a read-only server answers a ping")
	err = s.Writable(t.Context())
	require.Error(t, err)
	require.True(t, store.IsUnavailable(err), "read-only is not read as unavailable: %v", err)

	_, err = conn.Exec(t.Context(), `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` RESET default_transaction_read_only`)
	require.NoError(t, err)
	require.NoError(t, s.Writable(t.Context()))
}
