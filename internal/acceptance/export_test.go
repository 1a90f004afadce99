package acceptance

// Stats counts the INSERT statements run and the requests they carried.
type Stats struct{ Inserts, Requests int64 }

// Stats returns the counts so far.
func (a *Acceptor) Stats() Stats { return Stats{Inserts: a.inserts.Load(), Requests: a.reqs.Load()} }

// Writing reports whether Run's writers take requests (Accept goes through them).
func (a *Acceptor) Writing() bool { return a.writing.Load() }

// Running reports whether Run takes offered events (Offer drops them before).
func (h *Handoff) Running() bool { return h.running.Load() }
