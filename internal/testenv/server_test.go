package testenv

import "testing"

// The real server keeps the shared server's small pools (and claims them of the budget) unless
// its PG names another server, a cluster of the run's own.
func TestRealServerPoolForItsPostgreSQL(t *testing.T) {
	shared := realServerPool{main: RealServerMaxConns, visibility: RealServerVisibilityMaxConns, shared: true}
	private := realServerPool{main: PrivateRealServerMaxConns, visibility: PrivateRealServerVisibilityMaxConns}
	for _, c := range []struct {
		pg   string
		want realServerPool
	}{
		{"", shared},
		{"postgres://postgres@127.0.0.1:5432", shared},
		{"postgres://postgres@localhost:5432/", shared},
		{"postgres://postgres@127.0.0.1", shared},
		{"postgres://postgres:pw@[::1]:5432", shared},
		{"postgres://postgres@127.0.0.1:21990", private},
		{"postgres://postgres@db.internal:5432", private},
		{"postgres://postgres@127.0.0.1:%zz", shared},
	} {
		if got := realServerPoolFor(c.pg); got != c.want {
			t.Errorf("realServerPoolFor(%q) = %+v, want %+v", c.pg, got, c.want)
		}
	}
}
