package store

// MigrateTo is migrateTo for the tests of package store_test, which build a database as an
// older release left it.
var MigrateTo = migrateTo

// IsNoPartition is isNoPartition, for a test that provokes PostgreSQL's own error.
var IsNoPartition = isNoPartition
