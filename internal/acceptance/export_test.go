package acceptance

// Stats counts the INSERT statements run and the requests they carried.
type Stats struct{ Inserts, Requests int64 }

// Stats returns the counts so far.
func (a *Acceptor) Stats() Stats { return Stats{Inserts: a.inserts.Load(), Requests: a.reqs.Load()} }
