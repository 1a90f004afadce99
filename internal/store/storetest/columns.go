package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// qTextColumns lists every column of every table in the public schema that holds text: text,
// varchar, char, json and jsonb. Partitions are tables of their own and are listed too. Read
// from the catalog, so a table or column added later is covered without a change here.
const qTextColumns = `
SELECT c.table_name, c.column_name
FROM information_schema.columns c
JOIN information_schema.tables t USING (table_schema, table_name)
WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
  AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb')
ORDER BY c.table_name, c.column_name`

// Hits counts, per "table.column" of every text, varchar, char, json and jsonb column of every
// table in the public schema, the rows whose value contains any of needles, case-insensitively
// (ILIKE over the value's text). Only columns with hits are in the map; it is empty when no
// column mentions any needle. A test of erasure holds this to zero.
func Hits(ctx context.Context, q Querier, needles ...string) (map[string]int, error) {
	cols, err := textColumns(ctx, q)
	if err != nil {
		return nil, err
	}
	patterns := make([]string, len(needles))
	esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	for i, n := range needles {
		patterns[i] = "%" + esc.Replace(n) + "%"
	}
	hits := map[string]int{}
	for _, c := range cols {
		sql := fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s::text ILIKE ANY($1)`,
			pgx.Identifier{c[0]}.Sanitize(), pgx.Identifier{c[1]}.Sanitize())
		var n int
		rows, err := q.Query(ctx, sql, patterns)
		if err == nil {
			_, err = pgx.ForEachRow(rows, []any{&n}, func() error { return nil })
		}
		if err != nil {
			return nil, fmt.Errorf("hits in %s.%s: %w", c[0], c[1], err)
		}
		if n > 0 {
			hits[c[0]+"."+c[1]] = n
		}
	}
	return hits, nil
}

// TextColumns lists "table.column" for every column Hits reads.
func TextColumns(ctx context.Context, q Querier) ([]string, error) {
	cols, err := textColumns(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c[0] + "." + c[1]
	}
	return out, nil
}

func textColumns(ctx context.Context, q Querier) ([][2]string, error) {
	rows, err := q.Query(ctx, qTextColumns)
	if err != nil {
		return nil, fmt.Errorf("text columns: %w", err)
	}
	var (
		cols        [][2]string
		table, name string
	)
	if _, err := pgx.ForEachRow(rows, []any{&table, &name}, func() error {
		cols = append(cols, [2]string{table, name})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("text columns: %w", err)
	}
	return cols, nil
}

// Snapshot returns every row of every table in the public schema as its text, per table, in
// text order: two snapshots tell which rows a step changed (Missing).
func Snapshot(ctx context.Context, q Querier) (map[string][]string, error) {
	rows, err := q.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var (
		tables []string
		table  string
	)
	if _, err := pgx.ForEachRow(rows, []any{&table}, func() error { tables = append(tables, table); return nil }); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	out := map[string][]string{}
	for _, table := range tables {
		rows, err := q.Query(ctx, fmt.Sprintf(`SELECT t::text FROM %s t ORDER BY 1`, pgx.Identifier{table}.Sanitize()))
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", table, err)
		}
		var row string
		list := []string{}
		if _, err := pgx.ForEachRow(rows, []any{&row}, func() error { list = append(list, row); return nil }); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", table, err)
		}
		out[table] = list
	}
	return out, nil
}

// Missing lists, as "table: row", the rows of a that b does not hold, leaving out those skip
// reports true for (nil: none). Missing(before, after, …) is what a step removed or changed;
// Missing(after, before, …) what it added or changed.
func Missing(a, b map[string][]string, skip func(table, row string) bool) []string {
	var out []string
	tables := make([]string, 0, len(a))
	for t := range a {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	for _, t := range tables {
		in := make(map[string]bool, len(b[t]))
		for _, row := range b[t] {
			in[row] = true
		}
		for _, row := range a[t] {
			if !in[row] && (skip == nil || !skip(t, row)) {
				out = append(out, t+": "+row)
			}
		}
	}
	return out
}
