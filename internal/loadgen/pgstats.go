package loadgen

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGStats is what mailhook's role did to PostgreSQL from the first request until every
// accepted event was processed, per accepted event. It needs pg_stat_statements (preloaded,
// and created in the database "postgres" of the same cluster) and a role of mailhook's own, so
// that this load generator's reads and the verdict's are not counted.
type PGStats struct {
	Role   string `json:"role"`
	Events int    `json:"events"`
	// Calls are pg_stat_statements calls: each one round trip in pgx's exec and cache modes.
	// TxCalls are the BEGIN, COMMIT and ROLLBACK among them; Statements the rest.
	Calls      int64 `json:"calls"`
	TxCalls    int64 `json:"tx_calls"`
	Statements int64 `json:"statements"`
	// RowsWritten is pg_stat_database's inserted+updated+deleted tuples of the database (all
	// roles; the load generator writes none), WALBytes pg_stat_wal's (the whole cluster).
	RowsWritten int64 `json:"rows_written"`
	WALBytes    int64 `json:"wal_bytes"`
	WALRecords  int64 `json:"wal_records"`
	// ByStatement is calls per statement text (its first 100 characters), per accepted event.
	ByStatement map[string]float64 `json:"by_statement"`
	PerEvent    struct {
		Statements  float64 `json:"statements"`
		RoundTrips  float64 `json:"round_trips"`
		RowsWritten float64 `json:"rows_written"`
		WALBytes    float64 `json:"wal_bytes"`
	} `json:"per_event"`
}

type pgSnapshot struct {
	calls, txCalls, rows, walBytes, walRecords int64
	byStatement                                map[string]int64
}

// pgStatsConn connects to the database "postgres" of the cluster dbURL names.
func pgStatsConn(ctx context.Context, dbURL string) (*pgx.Conn, string, error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return nil, "", err
	}
	db := cfg.Database
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("pg stats: %w", err)
	}
	return conn, db, nil
}

func takeStatements(ctx context.Context, conn *pgx.Conn, role, db string, s *pgSnapshot) error {
	rows, err := conn.Query(ctx, `
SELECT left(regexp_replace(s.query, '\s+', ' ', 'g'), 100), sum(s.calls)::bigint,
       s.query ~* '^\s*(begin|commit|rollback|start transaction)'
FROM pg_stat_statements s
JOIN pg_roles r ON r.oid = s.userid
JOIN pg_database d ON d.oid = s.dbid
WHERE r.rolname = $1 AND d.datname = $2
GROUP BY 1, 3`, role, db)
	if err != nil {
		return fmt.Errorf("pg stats: pg_stat_statements: %w", err)
	}
	s.byStatement = map[string]int64{}
	for rows.Next() {
		var (
			q  string
			n  int64
			tx bool
		)
		if err := rows.Scan(&q, &n, &tx); err != nil {
			return err
		}
		s.byStatement[q] += n
		s.calls += n
		if tx {
			s.txCalls += n
		}
	}
	return rows.Err()
}

func takeWrites(ctx context.Context, conn *pgx.Conn, db string, s *pgSnapshot) error {
	err := conn.QueryRow(ctx, `
SELECT (SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database WHERE datname = $1),
       wal_bytes::bigint, wal_records FROM pg_stat_wal`, db).Scan(&s.rows, &s.walBytes, &s.walRecords)
	if err != nil {
		return fmt.Errorf("pg stats: pg_stat_database, pg_stat_wal: %w", err)
	}
	return nil
}

// pgStatsBefore snapshots the counters; pgStatsAfter takes the statements at once (before the
// verdict's requests make mailhook read) and the writes once backends have flushed their
// counters (PostgreSQL 15 publishes an active backend's within about 10 s).
func pgStatsBefore(ctx context.Context, conn *pgx.Conn, role, db string) (pgSnapshot, error) {
	var s pgSnapshot
	if err := takeStatements(ctx, conn, role, db, &s); err != nil {
		return s, err
	}
	return s, takeWrites(ctx, conn, db, &s)
}

func pgStatsAfter(ctx context.Context, conn *pgx.Conn, role, db string, before pgSnapshot, events int) (*PGStats, error) {
	var a pgSnapshot
	if err := takeStatements(ctx, conn, role, db, &a); err != nil {
		return nil, err
	}
	select {
	case <-time.After(11 * time.Second):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := takeWrites(ctx, conn, db, &a); err != nil {
		return nil, err
	}
	st := &PGStats{Role: role, Events: events, Calls: a.calls - before.calls, TxCalls: a.txCalls - before.txCalls,
		RowsWritten: a.rows - before.rows, WALBytes: a.walBytes - before.walBytes, WALRecords: a.walRecords - before.walRecords,
		ByStatement: map[string]float64{}}
	st.Statements = st.Calls - st.TxCalls
	if events == 0 {
		return st, nil
	}
	for q, n := range a.byStatement {
		if d := n - before.byStatement[q]; d > 0 {
			st.ByStatement[q] = float64(d) / float64(events)
		}
	}
	e := float64(events)
	st.PerEvent.Statements = float64(st.Statements) / e
	st.PerEvent.RoundTrips = float64(st.Calls) / e
	st.PerEvent.RowsWritten = float64(st.RowsWritten) / e
	st.PerEvent.WALBytes = float64(st.WALBytes) / e
	return st, nil
}
