package store

import (
	"fmt"
	"strconv"
	"strings"
)

// listQuery builds a keyset-paged list's WHERE clause and its arguments: the explorer's pages,
// the audit trail's and a timeline's. Every value goes in as an argument.
type listQuery struct {
	where []string
	args  []any
}

// arg adds v as an argument and returns its placeholder.
func (q *listQuery) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

// and adds a condition.
func (q *listQuery) and(cond string) { q.where = append(q.where, cond) }

// after keeps the rows strictly before (desc) or after (asc) the position (at, keys…) in the
// order of the columns atCol, keyCols…. The first condition is the one an index on atCol can
// use; the row comparison breaks ties within one instant (a batch's rows share its
// transaction's now()).
func (q *listQuery) after(desc bool, atCol string, keyCols []string, at any, keys ...any) {
	cmp, op := "<=", "<"
	if !desc {
		cmp, op = ">=", ">"
	}
	p := q.arg(at)
	vals := []string{p}
	for _, k := range keys {
		vals = append(vals, q.arg(k))
	}
	q.and(fmt.Sprintf("%s %s %s AND (%s) %s (%s)", atCol, cmp, p, strings.Join(append([]string{atCol}, keyCols...), ", "), op,
		strings.Join(vals, ", ")))
}

// whereClause is "WHERE …\n", or "" without conditions.
func (q *listQuery) whereClause() string {
	if len(q.where) == 0 {
		return ""
	}
	return "WHERE " + strings.Join(q.where, "\n  AND ") + "\n"
}
