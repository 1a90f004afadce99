package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/mailaddr"
)

// Erasure (GDPR art. 17) removes or redacts an address everywhere mailhook stored it
// (docs/operations/erasure.md):
//
//   - event payloads (event_payloads, and webhook_events' legacy columns) and notification bodies
//     (notification_bodies, and notifications' legacy body) that mention it: an inbound email's
//     (email.received's) is removed whole, its key row kept; any other has the address redacted
//     in its JSON (erasure.Matcher.RedactJSON), a normalized event losing a recipient that is
//     the address;
//   - messages and message_events: a recipient that is the address is emptied, and the
//     diagnostic and note have it redacted; so do notifications.last_error and webhook_events'
//     relay and quarantine errors;
//   - soft_bounces of the address are deleted (the escalation's count starts again);
//   - suppressions and suppression_lifts keep their rows under the keyed hash of the address
//     (erasure.Hasher) instead of the address, so that the suppression check, asked for the
//     address, still finds it; a lift's reason has the address redacted;
//   - one erasures row records it when it is done: the hash, who, why (redacted), and how many
//     rows each table had changed.
//
// It runs as a job (erasure_jobs) that the Erasure workflow drives phase by phase
// (ErasurePhase: the check, then one step per table, as erasure.Plan orders them), each phase
// in batches of one block range of one relation, each batch a short transaction that also moves
// the job's cursor and counts, so no lock is held for long, a retried phase goes on where the
// last committed batch left it (the address sealed in the job until it ends), and GET
// /v1/erasures/jobs/{id} shows how far it is. Candidate rows are found by LIKE over each
// column's lower-cased text (nothing indexes the inside of a payload: every page is read once),
// and the Go matcher decides, so "_" in an address or a longer address that contains it (joann@
// for ann@) changes nothing. Erasing again finds nothing left: every count is 0, and only a new
// erasures row is written.

// ErasureTables are the tables an erasure changes, the keys of Erasure.Counts.
var ErasureTables = erasure.Tables

// ErrErasureNotConfigured is returned (wrapped) by StartErasure when no hash key is set: an
// erased suppression could not be kept, and a hash under a made-up key could be reversed by
// hashing guessed addresses.
var ErrErasureNotConfigured = errors.New("erasure is not configured: set erasure.hash_key (MAILHOOK_ERASURE_KEY) to base64 of 32 random bytes")

// ErrInvalidAddress is returned (wrapped) by StartErasure for what is not one email address.
var ErrInvalidAddress = erasure.ErrInvalidAddress

// ErrSharedAddress is returned (wrapped, as *SharedAddressError) by ErasureOutcome when the
// address is one inbound emails were sent to (support@yourapp.example): erasing it would remove
// every customer's email to that mailbox. Nothing was changed. ErasureRequest.Force erases it
// anyway, and ErasureScopeInbound removes only the inbound emails.
var ErrSharedAddress = errors.New("the address received inbound emails: erasing it removes every one of them")

// SharedAddressError is ErrSharedAddress with the job's check: InboundTo says how many.
type SharedAddressError struct{ Would Erasure }

func (e *SharedAddressError) Error() string {
	return fmt.Sprintf("%v (%d of them)", ErrSharedAddress, e.Would.InboundTo)
}

// sharedAddress is the error of a job refused as a mailbox of yours, nil for any other job.
func sharedAddress(j domain.ErasureJob) error {
	if j.Status != ErasureRefused {
		return nil
	}
	return &SharedAddressError{Would: Erasure{JobID: j.ID, AddressHash: j.AddressHash, Scope: j.Scope, InboundTo: j.InboundTo,
		Counts: j.Counts}}
}

func (e *SharedAddressError) Unwrap() error { return ErrSharedAddress }

// Erasure scopes: what of an address an erasure changes (erasure.ScopeAll, erasure.ScopeInbound).
const (
	ErasureScopeAll     = erasure.ScopeAll
	ErasureScopeInbound = erasure.ScopeInbound
)

// ErasureRequest asks to erase an address.
type ErasureRequest struct {
	// Address is erased: it is normalized as a suppressions key, and never stored or logged.
	Address string
	// ErasedBy names who asked (the admin token's name, or cli:<user>).
	ErasedBy string
	// Reason says why (a ticket, a request's date); any mention of the address is redacted.
	Reason string
	// Scope is ErasureScopeAll ("" too) or ErasureScopeInbound.
	Scope string
	// Force erases an address that inbound emails were sent to (see ErrSharedAddress).
	Force bool
	// DryRun finds and counts what the erasure would change, changes nothing and records no
	// audit row.
	DryRun bool
}

// Erasure is the audit row of one erasure, as POST /v1/erasures answers it. It holds no address.
type Erasure struct {
	ID int64 `json:"id"`
	// JobID is the job that did it (GET /v1/erasures/jobs/{id}).
	JobID       int64  `json:"job_id"`
	AddressHash string `json:"address_hash"`
	ErasedBy    string `json:"erased_by"`
	Reason      string `json:"reason"`
	// Counts says, per table of ErasureTables, how many rows were changed: removed, redacted or
	// re-keyed under the hash.
	Counts map[string]int64 `json:"counts"`
	// Total is the sum of Counts: 0 when nothing was left to erase.
	Total int64 `json:"total"`
	// Scope is what was erased: ErasureScopeAll or ErasureScopeInbound.
	Scope string `json:"scope"`
	// InboundTo counts the inbound emails sent to the address among those removed: more than 0
	// only for a mailbox of yours, which takes Force or ErasureScopeInbound.
	InboundTo int64 `json:"inbound_to_address"`
	// DryRun says nothing was changed: the counts are what the erasure would change, and ID is
	// 0 (no audit row).
	DryRun bool `json:"dry_run"`
	// TookMS is the job's time, from its start to its end.
	TookMS   int64     `json:"took_ms"`
	ErasedAt time.Time `json:"erased_at"`
}

// Erasure job statuses.
const (
	ErasureRunning = domain.ErasureRunning
	ErasureDone    = domain.ErasureDone
	ErasureRefused = domain.ErasureRefused // a mailbox of yours, without Force (ErrSharedAddress)
	ErasureFailed  = domain.ErasureFailed  // the sealed address no longer opens (the hash key changed)
)

// ErrInvalidErasureScope is returned (wrapped) for a scope that is neither ErasureScopeAll nor
// ErasureScopeInbound.
var ErrInvalidErasureScope = errors.New("not an erasure scope (all, inbound)")

// ErrErasureMoved is returned (wrapped) by ErasurePhase when another runner moved the job's
// cursor under this one (an activity attempt that outlived its timeout): the batch was rolled
// back, and a retry goes on from where the cursor is.
var ErrErasureMoved = errors.New("the erasure job's cursor moved under this runner")

// ErrErasureRunning is returned (wrapped) by ErasureOutcome for a job that has not ended.
var ErrErasureRunning = errors.New("the erasure job is still running")

// StartErasure records the job of an erasure, its address sealed, or finds the one already
// running for the address with the same settings (the request joins it). Errors wrap
// ErrErasureNotConfigured, ErrInvalidAddress, ErrInvalidErasureScope or ErrOtherErasureRunning,
// or are the database's, and name the address by its hash only.
func (s *Erasures) StartErasure(ctx context.Context, req ErasureRequest) (domain.ErasureJob, error) {
	if !s.hasher.Configured() {
		return domain.ErasureJob{}, fmt.Errorf("erase: %w", ErrErasureNotConfigured)
	}
	address := mailaddr.Key(req.Address)
	m, err := erasure.NewMatcher(address)
	if err != nil {
		return domain.ErasureJob{}, fmt.Errorf("erase: %w", err)
	}
	scope := cmp.Or(req.Scope, ErasureScopeAll)
	if scope != ErasureScopeAll && scope != ErasureScopeInbound {
		return domain.ErasureJob{}, fmt.Errorf("erase: scope %q: %w", scope, ErrInvalidErasureScope)
	}
	hash, err := s.hasher.Hash(address)
	if err != nil {
		return domain.ErasureJob{}, fmt.Errorf("erase: %w", err)
	}
	reason, _ := m.RedactText(req.Reason)
	counts, err := json.Marshal(zeroCounts())
	if err != nil {
		return domain.ErasureJob{}, err
	}
	sealed, err := s.hasher.Seal(address, []byte(hash))
	if err != nil {
		return domain.ErasureJob{}, fmt.Errorf("erase: %w", err)
	}
	var id int64
	err = s.pool.QueryRow(ctx, qInsertErasureJob, hash, scope, req.Force, req.DryRun, req.ErasedBy, reason, sealed, string(counts)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		// One is running for the address already: this request joins it.
		err = s.pool.QueryRow(ctx, qRunningErasureJob, hash).Scan(&id)
	}
	if err != nil {
		return domain.ErasureJob{}, fmt.Errorf("erase %s: start: %w", hash, err)
	}
	job, err := s.ErasureJob(ctx, id)
	if err == nil && (job.Scope != scope || job.Force != req.Force || job.DryRun != req.DryRun) {
		err = fmt.Errorf("erase %s: job %d: %w", hash, job.ID, ErrOtherErasureRunning)
	}
	if err != nil {
		return domain.ErasureJob{}, err
	}
	return job, nil
}

// ErrOtherErasureRunning is returned (wrapped) by StartErasure when the address's erasure runs
// already with other settings (a dry run while a real one is asked, another scope): wait for it.
var ErrOtherErasureRunning = errors.New("another erasure of this address is running, with other settings")

// ErasureJob returns a job; the error wraps domain.ErrNotFound when there is none.
func (s *Erasures) ErasureJob(ctx context.Context, id int64) (domain.ErasureJob, error) {
	job, err := scanErasureJob(s.pool.QueryRow(ctx, qGetErasureJob, id))
	if errors.Is(err, pgx.ErrNoRows) {
		err = domain.ErrNotFound
	}
	if err != nil {
		return domain.ErasureJob{}, fmt.Errorf("erasure job %d: %w", id, err)
	}
	return job, nil
}

// RunningErasureJobs lists the ids of the jobs still running, oldest first: a worker starts
// their workflows at its start, so a job whose workflow was never started (Temporal was down) or
// that an older version ran by itself goes on.
func (s *Erasures) RunningErasureJobs(ctx context.Context) ([]int64, error) {
	rows, err := s.pool.Query(ctx, qRunningErasureJobs)
	if err != nil {
		return nil, fmt.Errorf("running erasure jobs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("running erasure jobs: %w", err)
	}
	return ids, nil
}

func zeroCounts() map[string]int64 {
	counts := make(map[string]int64, len(ErasureTables))
	for _, table := range ErasureTables {
		counts[table] = 0
	}
	return counts
}

// ErasureOutcome is the answer of a job that ended: its audit row (for a dry run, the counts
// and no row), or why it has none: a *SharedAddressError for a mailbox of yours, an error
// naming the failure for a failed job, ErrErasureRunning for one that goes on.
func (s *Erasures) ErasureOutcome(ctx context.Context, id int64) (Erasure, error) {
	job, err := s.ErasureJob(ctx, id)
	if err != nil {
		return Erasure{}, err
	}
	switch job.Status {
	case ErasureRunning:
		return Erasure{}, fmt.Errorf("erase %s: job %d: %w", job.AddressHash, job.ID, ErrErasureRunning)
	case ErasureRefused:
		return Erasure{}, fmt.Errorf("erase %s: %w", job.AddressHash, sharedAddress(job))
	case ErasureFailed:
		return Erasure{}, fmt.Errorf("erase %s: job %d failed: %s", job.AddressHash, job.ID, job.Error)
	}
	out := Erasure{ID: job.ErasureID, JobID: job.ID, AddressHash: job.AddressHash, ErasedBy: job.ErasedBy, Reason: job.Reason,
		Counts: job.Counts, Total: job.Total, Scope: job.Scope, InboundTo: job.InboundTo, DryRun: job.DryRun}
	if job.FinishedAt != nil {
		out.TookMS = job.FinishedAt.Sub(job.CreatedAt).Milliseconds()
		out.ErasedAt = *job.FinishedAt
	}
	if job.ErasureID != 0 {
		if err := s.pool.QueryRow(ctx, qGetErasure, job.ErasureID).Scan(&out.TookMS, &out.ErasedAt); err != nil {
			return Erasure{}, fmt.Errorf("erasure %d: %w", job.ErasureID, err)
		}
	}
	return out, nil
}

// FinishErasure ends a running job as status: ErasureDone writes the audit row (none for a dry
// run) and ends the job in one transaction; ErasureRefused ends it without one. Either drops the
// seal. A job that ended already is left as it is (a retried call). It returns the job as it
// ended.
func (s *Erasures) FinishErasure(ctx context.Context, id int64, status string) (domain.ErasureJob, error) {
	if status != ErasureDone && status != ErasureRefused {
		return domain.ErasureJob{}, fmt.Errorf("erasure job %d: cannot end as %q", id, status)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		job, err := scanErasureJob(tx.QueryRow(ctx, qGetErasureJob+` FOR UPDATE`, id))
		if err != nil || job.Status != ErasureRunning {
			return err
		}
		var erasureID *int64
		if status == ErasureDone && !job.DryRun {
			counts, err := json.Marshal(job.Counts)
			if err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, qInsertErasure, job.AddressHash, job.ErasedBy, job.Reason, string(counts), job.Total, job.CreatedAt).
				Scan(&erasureID); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, qFinishErasureJob, id, status, erasureID)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = domain.ErrNotFound
	}
	if err != nil {
		return domain.ErasureJob{}, fmt.Errorf("erasure job %d: finish: %w", id, err)
	}
	return s.ErasureJob(ctx, id)
}

// open returns a running job with its matcher, opened from its sealed address. A seal that no
// longer opens fails the job (ErrErasureFailed).
func (s *Erasures) open(ctx context.Context, id int64) (domain.ErasureJob, *erasure.Matcher, error) {
	var sealed []byte
	job, err := scanErasureJob(s.pool.QueryRow(ctx, qGetErasureJob, id), &sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		err = domain.ErrNotFound
	}
	if err != nil || job.Status != ErasureRunning {
		return job, nil, err
	}
	address, err := s.hasher.Open(sealed, []byte(job.AddressHash))
	var m *erasure.Matcher
	if err == nil {
		m, err = erasure.NewMatcher(address)
	}
	if err == nil {
		if hash, herr := s.hasher.Hash(address); herr != nil || hash != job.AddressHash {
			err = errors.New("not this job's address")
		}
	}
	if err != nil {
		// The hash key changed under it: nothing can finish it. Say so, and drop the seal.
		if _, ferr := s.pool.Exec(ctx, qFailErasureJob, id, err.Error()); ferr != nil {
			return job, nil, fmt.Errorf("erasure job %d: %w", id, ferr)
		}
		return job, nil, fmt.Errorf("erasure job %d: %w: %v", id, domain.ErrErasureFailed, err)
	}
	return job, m.WithPriorKeys(s.priorKeys), nil
}

// ErasurePhase runs the phase named phase (one of erasure.Plan's for the job) of a running job,
// batch by batch from its cursor, until the phase's end (more false) or o.Until (more true).
// A phase the cursor is past already returns at once; so does a job that ended (its status says
// how). It returns the job as the last batch left it. Errors wrap ErrErasureFailed,
// ErrErasureMoved or domain.ErrNotFound, or are the database's; a canceled ctx rolls back only the
// batch in flight.
func (s *Erasures) ErasurePhase(ctx context.Context, id int64, phase string, o domain.PhaseOptions) (job domain.ErasureJob, more bool, err error) {
	job, m, err := s.open(ctx, id)
	if err != nil || job.Status != ErasureRunning {
		return job, false, err
	}
	phases := erasure.Plan(job.Scope, job.Force, job.DryRun)
	at := slices.IndexFunc(phases, func(p erasure.Phase) bool { return p.Name == phase })
	if at < 0 {
		return job, false, fmt.Errorf("erasure job %d: no phase %q for scope %s, force %v, dry run %v", id, phase, job.Scope, job.Force, job.DryRun)
	}
	if cursor := erasure.PhaseIndex(phases, job.Phase); cursor > at {
		return job, false, nil // done before
	}
	r := &jobRun{s: s, job: &job, m: m, likes: m.LikePatterns(), blocks: cmp.Or(o.BatchBlocks, domain.DefaultErasureBatchBlocks),
		progress: o.Progress, until: o.Until}
	more, err = r.phase(ctx, phases[at])
	if err != nil {
		// By the job's id: the error goes into the run's history, where not even the hash goes.
		return job, false, fmt.Errorf("erasure job %d: %w", id, err)
	}
	return job, more, nil
}

// ErasureRuns are the workflow IDs of Temporal runs that prior versions built from a key that
// holds the job's address (an event's run, and its replays'), for the caller to delete before
// the job's first change: no codec encrypts a workflow ID. Once the job has re-keyed the rows,
// it finds none.
func (s *Erasures) ErasureRuns(ctx context.Context, id int64) ([]string, error) {
	job, m, err := s.open(ctx, id)
	if err != nil || job.Status != ErasureRunning {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, qPriorKeyedRuns, m.LikePatterns(), s.priorKeys.Providers())
	if err != nil {
		return nil, fmt.Errorf("find the runs keyed by the address: %w", err)
	}
	var ids []string
	var provider, eventID, workflowID string
	_, err = pgx.ForEachRow(rows, []any{&provider, &eventID, &workflowID}, func() error {
		if _, ok := m.EventID(provider, eventID); ok {
			ids = append(ids, workflowID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find the runs keyed by the address: %w", err)
	}
	return ids, nil
}

// jobRun is one call's run of one phase of a job.
type jobRun struct {
	s        *Erasures
	job      *domain.ErasureJob
	m        *erasure.Matcher
	likes    []string
	blocks   int64
	progress func(domain.ErasureJob)
	until    time.Time
	// cursor is the job row's cursor as this run last read or wrote it: a batch moves it only
	// from there, so two runners never both commit a batch (ErrErasureMoved).
	cursor struct {
		phase, relation string
		nextBlock       int64
	}
}

// phase goes through p's relations from the job's cursor, block range by block range.
func (r *jobRun) phase(ctx context.Context, p erasure.Phase) (more bool, err error) {
	job := r.job
	r.cursor.phase, r.cursor.relation, r.cursor.nextBlock = job.Phase, job.CursorRelation, job.CursorBlock
	relation, next := "", int64(0)
	if job.Phase == p.Name {
		relation, next = job.CursorRelation, job.CursorBlock // resumed
	}
	rels, err := r.relations(ctx, p.Table)
	if err != nil {
		return false, err
	}
	st := stepOf(p)
	for _, rel := range rels {
		if relation != "" && rel < relation {
			continue // done before
		}
		if rel != relation {
			relation, next = rel, 0
		}
		for {
			size, err := r.size(ctx, rel)
			if err != nil {
				return false, err
			}
			if next >= size {
				break
			}
			if !r.until.IsZero() && time.Now().After(r.until) {
				return true, nil
			}
			if err := r.batch(ctx, p, st, rel, next, next+r.blocks); err != nil {
				return false, err
			}
			next += r.blocks
		}
	}
	return false, nil
}

// stepOf is the step of a phase that changes rows, nil for the check.
func stepOf(p erasure.Phase) *step {
	if p.Check {
		return nil
	}
	for i := range erasureSteps {
		if erasureSteps[i].table == p.Table {
			return &erasureSteps[i]
		}
	}
	panic("store: no erasure step for table " + p.Table)
}

// checkSQL is the check's query over table.
func checkSQL(table string) string {
	if table == "webhook_events" {
		return qInboundToLegacy
	}
	return qInboundToPayloads
}

// progress sets Phases and PhasesDone from the job's settings and phase.
func progress(j *domain.ErasureJob) {
	phases := erasure.Plan(j.Scope, j.Force, j.DryRun)
	j.Phases, j.PhasesDone = len(phases), erasure.PhaseIndex(phases, j.Phase)
	if j.Status != ErasureRunning {
		j.PhasesDone, j.Phase = j.Phases, ""
	}
}

// relations are the leaves of table: itself, or its partitions, in name order (the cursor's).
func (r *jobRun) relations(ctx context.Context, table string) ([]string, error) {
	rows, err := r.s.pool.Query(ctx, qErasureRelations, table)
	if err != nil {
		return nil, fmt.Errorf("relations of %s: %w", table, err)
	}
	rels, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("relations of %s: %w", table, err)
	}
	return rels, nil
}

// size is rel's length in pages now: a relation that grows while the job reads it is read to
// its new end (what is written after the job passed a page is a later event's).
func (r *jobRun) size(ctx context.Context, rel string) (int64, error) {
	var n int64
	if err := r.s.pool.QueryRow(ctx, qRelationBlocks, rel).Scan(&n); err != nil {
		return 0, fmt.Errorf("size of %s: %w", rel, err)
	}
	return n, nil
}

// batch runs one block range of one phase (st nil: the check) in one transaction with the job's
// cursor and counts, and moves the cursor past it.
func (r *jobRun) batch(ctx context.Context, p erasure.Phase, st *step, rel string, lo, hi int64) error {
	job := r.job
	var inboundTo int64
	err := pgx.BeginFunc(ctx, r.s.pool, func(tx pgx.Tx) error {
		w := &eraser{tx: tx, m: r.m, hasher: r.s.hasher, open: r.s.openBody, likes: r.likes, counts: map[string]int64{},
			inboundOnly: job.Scope == ErasureScopeInbound}
		if st != nil {
			if err := st.run(w, ctx, rel, lo, hi); err != nil {
				return err
			}
		} else if err := w.countInboundIn(ctx, rel, checkSQL(p.Table), lo, hi); err != nil {
			return err
		}
		if !job.DryRun {
			if err := w.flush(ctx); err != nil {
				return err
			}
		}
		counts := maps.Clone(job.Counts)
		for table, n := range w.counts {
			counts[table] += n
		}
		doc, err := json.Marshal(counts)
		if err != nil {
			return err
		}
		c := r.cursor
		tag, err := tx.Exec(ctx, qMoveErasureJob, job.ID, c.phase, c.relation, c.nextBlock, p.Name, rel, hi, string(doc), w.inboundTo)
		if err != nil {
			return fmt.Errorf("move the job's cursor: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return ErrErasureMoved
		}
		job.Counts, inboundTo = counts, w.inboundTo
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s %s [%d, %d): %w", p.Name, rel, lo, hi, err)
	}
	// What the commit wrote to the job's row, so the run goes on without reading it back.
	job.Phase, job.CursorRelation, job.CursorBlock = p.Name, rel, hi
	r.cursor.phase, r.cursor.relation, r.cursor.nextBlock = p.Name, rel, hi
	job.Batches++
	job.InboundTo += inboundTo
	job.Total = 0
	for _, n := range job.Counts {
		job.Total += n
	}
	progress(job)
	if r.progress != nil {
		r.progress(*job)
	}
	return nil
}

// scanErasureJob scans a row of jobColumns, and the sealed address into sealed when given.
func scanErasureJob(row pgx.Row, sealed ...*[]byte) (domain.ErasureJob, error) {
	var (
		j         domain.ErasureJob
		counts    []byte
		erasureID *int64
		errText   *string
		seal      []byte
	)
	err := row.Scan(&j.ID, &j.Status, &j.AddressHash, &j.ErasedBy, &j.Reason, &j.Scope, &j.Force, &j.DryRun,
		&j.Phase, &j.CursorRelation, &j.CursorBlock, &counts, &j.InboundTo, &j.Batches, &erasureID, &errText,
		&j.CreatedAt, &j.UpdatedAt, &j.FinishedAt, &seal)
	if err != nil {
		return domain.ErasureJob{}, err
	}
	if len(sealed) > 0 {
		*sealed[0] = seal
	}
	if err := json.Unmarshal(counts, &j.Counts); err != nil {
		return domain.ErasureJob{}, fmt.Errorf("counts: %w", err)
	}
	for _, n := range j.Counts {
		j.Total += n
	}
	if erasureID != nil {
		j.ErasureID = *erasureID
	}
	if errText != nil {
		j.Error = *errText
	}
	progress(&j)
	return j, nil
}

// SQL of the erasure jobs.
const (
	jobColumns = `id, status, address_hash, erased_by, reason, scope, force, dry_run, phase, relation, next_block,
       counts::text, inbound_to, batches, erasure_id, error, created_at, updated_at, finished_at, sealed_address`

	// One running job per address (erasure_jobs_running_idx): a second request finds no row
	// here, and joins the running one.
	qInsertErasureJob = `
INSERT INTO erasure_jobs (address_hash, scope, force, dry_run, erased_by, reason, status, sealed_address, counts)
VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8::jsonb)
ON CONFLICT (address_hash) WHERE status = 'running' DO NOTHING
RETURNING id`

	qRunningErasureJob = `SELECT id FROM erasure_jobs WHERE address_hash = $1 AND status = 'running'`

	qRunningErasureJobs = `SELECT id FROM erasure_jobs WHERE status = 'running' ORDER BY id`

	qGetErasureJob = `SELECT ` + jobColumns + ` FROM erasure_jobs WHERE id = $1`

	// The batch moves the cursor only from where its runner last saw it ($2, $3, $4): a second
	// runner of the same phase (an attempt that outlived its timeout) finds no row, and rolls
	// its batch back.
	qMoveErasureJob = `
UPDATE erasure_jobs
SET phase = $5, relation = $6, next_block = $7, counts = $8::jsonb, inbound_to = inbound_to + $9,
    batches = batches + 1, updated_at = now()
WHERE id = $1 AND status = 'running' AND phase = $2 AND relation = $3 AND next_block = $4`

	qFinishErasureJob = `
UPDATE erasure_jobs
SET status = $2, erasure_id = $3, sealed_address = NULL, phase = '', finished_at = now(), updated_at = now()
WHERE id = $1 AND status = 'running'`

	qFailErasureJob = `
UPDATE erasure_jobs
SET status = 'failed', error = $2, sealed_address = NULL, finished_at = now(), updated_at = now()
WHERE id = $1 AND status = 'running'`

	qGetErasure = `SELECT took_ms, erased_at FROM erasures WHERE id = $1`

	// The event runs and replay runs whose workflow IDs hold a key of a provider in $2 that
	// mentions the address ($1); Go keeps those whose key is a prior version's
	// (erasure.Matcher.EventID).
	qPriorKeyedRuns = `
SELECT provider, event_id, provider || ':' || event_id FROM webhook_events
WHERE provider = ANY($2) AND lower(event_id) LIKE ANY($1)
UNION ALL
SELECT provider, event_id, workflow_id FROM replays
WHERE provider = ANY($2) AND lower(event_id) LIKE ANY($1)`

	// The leaves of a table: its partitions (pg_partition_tree lists a partitioned table and
	// its leaves), or the table itself, for which it lists nothing.
	qErasureRelations = `
SELECT relid::regclass::text AS rel FROM pg_partition_tree($1::regclass) WHERE isleaf
UNION ALL
SELECT $1::regclass::text WHERE NOT EXISTS (SELECT 1 FROM pg_partition_tree($1::regclass))
ORDER BY 1`

	qRelationBlocks = `SELECT pg_relation_size($1::regclass) / current_setting('block_size')::bigint`

	// took_ms is the job's time, from its start ($6) to now.
	qInsertErasure = `
INSERT INTO erasures (address_hash, erased_by, reason, counts, total, took_ms)
VALUES ($1, $2, $3, $4::jsonb, $5, (extract(epoch FROM now() - $6::timestamptz) * 1000)::bigint)
RETURNING id`
)
