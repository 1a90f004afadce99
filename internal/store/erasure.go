package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
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
// It runs as a job (erasure_jobs): table by table, one block range of one relation per batch,
// each batch a short transaction that also moves the job's cursor, so no lock is held for long,
// a restart resumes where it stopped (ResumeErasures, with the address sealed in the job until it
// ends), and GET /v1/erasures/jobs/{id} shows how far it is. Candidate rows are found by LIKE over
// each column's lower-cased text (nothing indexes the inside of a payload: every page is read
// once), and the Go matcher decides, so "_" in an address or a longer address that contains it
// (joann@ for ann@) changes nothing. Erasing again finds nothing left: every count is 0, and only
// a new erasures row is written.

// ErasureTables are the tables an erasure changes, the keys of Erasure.Counts.
var ErasureTables = []string{
	"event_payloads", "webhook_events", "notification_bodies", "notifications",
	"messages", "message_events", "soft_bounces", "suppressions", "suppression_lifts",
}

// ErrErasureNotConfigured is returned (wrapped) by Erase when no hash key is set: an erased
// suppression could not be kept, and a hash under a made-up key could be reversed by hashing
// guessed addresses.
var ErrErasureNotConfigured = errors.New("erasure is not configured: set erasure.hash_key (MAILHOOK_ERASURE_KEY) to base64 of 32 random bytes")

// ErrInvalidAddress is returned (wrapped) by Erase for what is not one email address.
var ErrInvalidAddress = erasure.ErrInvalidAddress

// WorkflowDeleter deletes every Temporal run of some workflow IDs (erasure.RunDeleter); an ID
// with no run is no error.
type WorkflowDeleter interface {
	DeleteWorkflows(ctx context.Context, ids []string) error
}

// ErrSharedAddress is returned (wrapped, as *SharedAddressError) by Erase when the address is
// one inbound emails were sent to (support@yourapp.example): erasing it would remove every
// customer's email to that mailbox. Nothing was changed. ErasureRequest.Force erases it anyway,
// and ErasureScopeInbound removes only the inbound emails.
var ErrSharedAddress = errors.New("the address received inbound emails: erasing it removes every one of them")

// SharedAddressError is ErrSharedAddress with the job's check: InboundTo says how many.
type SharedAddressError struct{ Would Erasure }

func (e *SharedAddressError) Error() string {
	return fmt.Sprintf("%v (%d of them)", ErrSharedAddress, e.Would.InboundTo)
}

// SharedAddress is the error of a job refused as a mailbox of yours, nil for any other job.
func (j ErasureJob) SharedAddress() error {
	if j.Status != ErasureRefused {
		return nil
	}
	return &SharedAddressError{Would: Erasure{JobID: j.ID, AddressHash: j.AddressHash, Scope: j.Scope, InboundTo: j.InboundTo,
		Counts: j.Counts}}
}

func (e *SharedAddressError) Unwrap() error { return ErrSharedAddress }

// Erasure scopes: what of an address an erasure changes.
const (
	// ErasureScopeAll erases the address everywhere (the default).
	ErasureScopeAll = "all"
	// ErasureScopeInbound removes only the inbound emails that mention the address, and their
	// notification bodies: for a mailbox of yours whose mail must go, while its suppressions,
	// messages and the rest stay as they are.
	ErasureScopeInbound = "inbound"
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
	DryRun   bool      `json:"dry_run"`
	TookMS   int64     `json:"took_ms"`
	ErasedAt time.Time `json:"erased_at"`
}

// Erasure job statuses.
const (
	ErasureRunning = "running"
	ErasureDone    = "done"
	ErasureRefused = "refused" // a mailbox of yours, without Force (ErrSharedAddress)
	ErasureFailed  = "failed"  // the sealed address no longer opens (the hash key changed)
)

// ErasureJob is an erasure as it runs, and after (GET /v1/erasures/jobs/{id}). It holds no
// address.
type ErasureJob struct {
	ID          int64  `json:"job_id"`
	Status      string `json:"status"`
	AddressHash string `json:"address_hash"`
	ErasedBy    string `json:"erased_by"`
	Reason      string `json:"reason"`
	Scope       string `json:"scope"`
	Force       bool   `json:"force"`
	DryRun      bool   `json:"dry_run"`
	// Phase is the table the job is at ("check" while it looks for inbound emails sent to the
	// address; "" once it ended); PhasesDone of Phases are behind it.
	Phase      string `json:"phase"`
	PhasesDone int    `json:"phases_done"`
	Phases     int    `json:"phases"`
	// Batches counts the transactions it committed.
	Batches int64 `json:"batches"`
	// Counts are the rows changed so far (a dry run: that would change), per table.
	Counts    map[string]int64 `json:"counts"`
	Total     int64            `json:"total"`
	InboundTo int64            `json:"inbound_to_address"`
	// ErasureID is the audit row, once done (0 for a dry run and until then).
	ErasureID  int64      `json:"erasure_id"`
	Error      string     `json:"error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at"`

	relation  string
	nextBlock int64
	sealed    []byte
}

// ErrInvalidErasureScope is returned (wrapped) for a scope that is neither ErasureScopeAll nor
// ErasureScopeInbound.
var ErrInvalidErasureScope = errors.New("not an erasure scope (all, inbound)")

// ErrErasureBusy is returned (wrapped) by RunErasure when another process holds the job's lease:
// it runs it.
var ErrErasureBusy = errors.New("another process is running this erasure")

// erasureLease is how long a job's runner holds it without committing a batch: past it, another
// process (ResumeErasures) takes the job over. Each batch renews it.
const erasureLease = time.Minute

// defaultErasureBatchBlocks is how many pages of a relation one batch reads: 16 MiB, a few
// hundred milliseconds of lower() and LIKE on a 2-core machine, so no batch holds its locks for
// long (docs/BENCHMARKS.md, "Erasure of one address").
const defaultErasureBatchBlocks = 2048

// Erase erases an address (see above) and returns its audit row: it starts the job (or joins
// the one already running for the address) and runs it to its end within ctx. Errors wrap
// ErrErasureNotConfigured, ErrInvalidAddress, ErrInvalidErasureScope, ErrSharedAddress (as
// *SharedAddressError) or ErrErasureBusy, or are the database's, and name the address by its
// hash only. A canceled ctx leaves the job where it stopped: Erase again, or ResumeErasures,
// goes on from there.
func (s *Store) Erase(ctx context.Context, req ErasureRequest) (Erasure, error) {
	job, address, err := s.StartErasure(ctx, req)
	if err != nil {
		return Erasure{}, err
	}
	return s.RunErasure(ctx, job.ID, address)
}

// StartErasure records the job of an erasure, or finds the one already running for the
// address, and returns it with the normalized address, which RunErasure takes.
func (s *Store) StartErasure(ctx context.Context, req ErasureRequest) (ErasureJob, string, error) {
	if !s.hasher.Configured() {
		return ErasureJob{}, "", fmt.Errorf("erase: %w", ErrErasureNotConfigured)
	}
	address := mailaddr.Key(req.Address)
	m, err := erasure.NewMatcher(address)
	if err != nil {
		return ErasureJob{}, "", fmt.Errorf("erase: %w", err)
	}
	scope := cmp.Or(req.Scope, ErasureScopeAll)
	if scope != ErasureScopeAll && scope != ErasureScopeInbound {
		return ErasureJob{}, "", fmt.Errorf("erase: scope %q: %w", scope, ErrInvalidErasureScope)
	}
	hash, err := s.hasher.Hash(address)
	if err != nil {
		return ErasureJob{}, "", fmt.Errorf("erase: %w", err)
	}
	reason, _ := m.RedactText(req.Reason)
	counts, err := json.Marshal(zeroCounts())
	if err != nil {
		return ErasureJob{}, "", err
	}
	sealed, err := s.hasher.Seal(address, []byte(hash))
	if err != nil {
		return ErasureJob{}, "", fmt.Errorf("erase: %w", err)
	}
	var id int64
	err = s.pool.QueryRow(ctx, qInsertErasureJob, hash, scope, req.Force, req.DryRun, req.ErasedBy, reason, sealed, string(counts)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		// One is running for the address already: this request joins it.
		err = s.pool.QueryRow(ctx, qRunningErasureJob, hash).Scan(&id)
	}
	if err != nil {
		return ErasureJob{}, "", fmt.Errorf("erase %s: start: %w", hash, err)
	}
	job, err := s.ErasureJob(ctx, id)
	if err == nil && (job.Scope != scope || job.Force != req.Force || job.DryRun != req.DryRun) {
		err = fmt.Errorf("erase %s: job %d: %w", hash, job.ID, ErrOtherErasureRunning)
	}
	if err != nil {
		return ErasureJob{}, "", err
	}
	return job, address, nil
}

// ErrOtherErasureRunning is returned (wrapped) by StartErasure when the address's erasure runs
// already with other settings (a dry run while a real one is asked, another scope): wait for it.
var ErrOtherErasureRunning = errors.New("another erasure of this address is running, with other settings")

// ErasureJob returns a job; the error wraps domain.ErrNotFound when there is none.
func (s *Store) ErasureJob(ctx context.Context, id int64) (ErasureJob, error) {
	job, err := scanErasureJob(s.pool.QueryRow(ctx, qGetErasureJob, id))
	if errors.Is(err, pgx.ErrNoRows) {
		err = domain.ErrNotFound
	}
	if err != nil {
		return ErasureJob{}, fmt.Errorf("erasure job %d: %w", id, err)
	}
	return job, nil
}

// ResumeErasures runs, one after the other, every running job that no process holds (its
// runner died or was stopped), opening each one's sealed address, and returns how many it ran
// to their end. serve calls it every minute, so an erasure survives a restart.
func (s *Store) ResumeErasures(ctx context.Context) (int, error) {
	if !s.hasher.Configured() {
		return 0, nil // a process without the key can neither open a job nor finish one
	}
	n := 0
	for {
		var (
			id     int64
			hash   string
			sealed []byte
		)
		err := s.pool.QueryRow(ctx, qOrphanErasureJob).Scan(&id, &hash, &sealed)
		if errors.Is(err, pgx.ErrNoRows) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("resume erasures: %w", err)
		}
		address, err := s.hasher.Open(sealed, []byte(hash))
		if err != nil {
			// The hash key changed under it: nothing can finish it. Say so, and drop the seal.
			if _, ferr := s.pool.Exec(ctx, qFailErasureJob, id, err.Error()); ferr != nil {
				return n, fmt.Errorf("resume erasure job %d: %w", id, ferr)
			}
			continue
		}
		_, err = s.RunErasure(ctx, id, address)
		switch {
		case errors.Is(err, ErrErasureBusy), errors.Is(err, ErrSharedAddress):
		case err != nil:
			return n, fmt.Errorf("resume erasure job %d: %w", id, err)
		}
		n++
	}
}

func zeroCounts() map[string]int64 {
	counts := make(map[string]int64, len(ErasureTables))
	for _, table := range ErasureTables {
		counts[table] = 0
	}
	return counts
}

// RunErasure runs a job to its end, batch by batch from where it stopped, and returns its audit
// row (for a dry run, the counts and no row). address is the job's, normalized (StartErasure's).
func (s *Store) RunErasure(ctx context.Context, id int64, address string) (Erasure, error) {
	start := time.Now()
	owner := randomOwner()
	job, err := scanErasureJob(s.pool.QueryRow(ctx, qClaimErasureJob, id, owner, erasureLease.Seconds()))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if job, err = s.ErasureJob(ctx, id); err != nil {
			return Erasure{}, err
		}
		if job.Status == ErasureRunning {
			return Erasure{}, fmt.Errorf("erase %s: %w", job.AddressHash, ErrErasureBusy)
		}
		return s.ended(ctx, job)
	case err != nil:
		return Erasure{}, fmt.Errorf("erasure job %d: claim: %w", id, err)
	}
	m, err := erasure.NewMatcher(address)
	if err != nil {
		return Erasure{}, fmt.Errorf("erase: %w", err)
	}
	if hash, err := s.hasher.Hash(address); err != nil || hash != job.AddressHash {
		return Erasure{}, fmt.Errorf("erasure job %d: not this address's job", id)
	}
	r := &jobRun{s: s, job: &job, owner: owner, m: m, likes: m.LikePatterns(), blocks: cmp.Or(s.erasureBatchBlocks, defaultErasureBatchBlocks)}
	if err := r.run(ctx); err != nil {
		if ctx.Err() != nil {
			// Stopped, not dead: let the next runner (this command again, or serve) take it at
			// once instead of after the lease.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = s.pool.Exec(rctx, qReleaseErasureJob, id, owner)
			cancel()
		}
		return Erasure{}, fmt.Errorf("erase %s: %w", job.AddressHash, err)
	}
	if job.Status == ErasureRefused {
		return Erasure{}, fmt.Errorf("erase %s: %w", job.AddressHash, job.SharedAddress())
	}
	return s.finish(ctx, r, time.Since(start))
}

// ended is the answer of a job that ended before: its audit row, or why it has none.
func (s *Store) ended(ctx context.Context, job ErasureJob) (Erasure, error) {
	switch job.Status {
	case ErasureRefused:
		return Erasure{}, fmt.Errorf("erase %s: %w", job.AddressHash, job.SharedAddress())
	case ErasureFailed:
		return Erasure{}, fmt.Errorf("erase %s: job %d failed: %s", job.AddressHash, job.ID, job.Error)
	}
	out := erasureOfJob(job)
	if job.ErasureID != 0 {
		if err := s.pool.QueryRow(ctx, qGetErasure, job.ErasureID).Scan(&out.TookMS, &out.ErasedAt); err != nil {
			return Erasure{}, fmt.Errorf("erasure %d: %w", job.ErasureID, err)
		}
	}
	return out, nil
}

func erasureOfJob(job ErasureJob) Erasure {
	return Erasure{ID: job.ErasureID, JobID: job.ID, AddressHash: job.AddressHash, ErasedBy: job.ErasedBy, Reason: job.Reason,
		Counts: job.Counts, Total: job.Total, Scope: job.Scope, InboundTo: job.InboundTo, DryRun: job.DryRun}
}

// finish ends a job that ran all its steps: the audit row (none for a dry run) and the job's
// end, in one transaction, its seal dropped.
func (s *Store) finish(ctx context.Context, r *jobRun, took time.Duration) (Erasure, error) {
	out := erasureOfJob(*r.job)
	out.TookMS = took.Milliseconds()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if !out.DryRun {
			counts, err := json.Marshal(out.Counts)
			if err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, qInsertErasure, out.AddressHash, out.ErasedBy, out.Reason, string(counts), out.Total, out.TookMS).
				Scan(&out.ID, &out.ErasedAt); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, qFinishErasureJob, r.job.ID, r.owner, ErasureDone, nullID(out.ID))
		if err == nil && tag.RowsAffected() != 1 {
			err = ErrErasureBusy
		}
		return err
	})
	if err != nil {
		return Erasure{}, fmt.Errorf("erase %s: finish: %w", out.AddressHash, err)
	}
	return out, nil
}

func nullID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

func randomOwner() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// jobRun is one process's run of a job.
type jobRun struct {
	s      *Store
	job    *ErasureJob
	owner  string
	m      *erasure.Matcher
	likes  []string
	blocks int64
}

// checkPhase is the phase before the steps, of a job that must first know whether the address is
// a mailbox of yours (ErrSharedAddress).
const checkPhase = "check"

// run goes through the job's phases from its cursor: the check, when it needs one, then each
// step's relations, block range by block range.
func (r *jobRun) run(ctx context.Context) error {
	job := r.job
	phases := jobPhases(job.Scope, job.Force, job.DryRun)
	// Resume at the cursor's phase; a job that has not begun starts at the first.
	at := 0
	for i, p := range phases {
		if p.name == job.Phase {
			at = i
		}
	}
	firstStep := slices.IndexFunc(phases, func(p phase) bool { return p.step != nil })
	for i := at; i < len(phases); i++ {
		p := phases[i]
		if job.Phase != p.name {
			job.Phase, job.relation, job.nextBlock = p.name, "", 0
		}
		if i == firstStep && job.relation == "" && !job.DryRun && job.Scope == ErasureScopeAll {
			// Before the first change, while the prior keys are still there to find: a job
			// resumed before its first batch deletes again, which finds nothing left to delete.
			if err := r.deleteRuns(ctx); err != nil {
				return err
			}
		}
		rels, err := r.relations(ctx, p.table)
		if err != nil {
			return err
		}
		for _, rel := range rels {
			if job.relation != "" && rel < job.relation {
				continue // done before the restart
			}
			if rel != job.relation {
				job.relation, job.nextBlock = rel, 0
			}
			for {
				size, err := r.size(ctx, rel)
				if err != nil {
					return err
				}
				if job.nextBlock >= size {
					break
				}
				if err := r.batch(ctx, p, rel, job.nextBlock, job.nextBlock+r.blocks); err != nil {
					return err
				}
			}
		}
		if p.name == checkPhase && job.InboundTo > 0 {
			return r.end(ctx, ErasureRefused)
		}
	}
	job.Phase = ""
	return nil
}

// deleteRuns deletes the Temporal runs whose workflow IDs prior versions built from a key that
// holds the address: an event's run, and its replays'.
func (r *jobRun) deleteRuns(ctx context.Context) error {
	if r.s.workflows == nil {
		return nil
	}
	rows, err := r.s.pool.Query(ctx, qPriorKeyedRuns, r.likes, erasure.PriorKeyProviders())
	if err != nil {
		return fmt.Errorf("find the runs keyed by the address: %w", err)
	}
	var ids []string
	var provider, eventID, workflowID string
	_, err = pgx.ForEachRow(rows, []any{&provider, &eventID, &workflowID}, func() error {
		if _, ok := r.m.EventID(provider, eventID); ok {
			ids = append(ids, workflowID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("find the runs keyed by the address: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	if err := r.s.workflows.DeleteWorkflows(ctx, ids); err != nil {
		return fmt.Errorf("delete the %d Temporal runs keyed by the address: %w", len(ids), err)
	}
	return nil
}

// phase is a check or a step over one table.
type phase struct {
	name, table string
	step        *step
	checkSQL    string
}

// jobPhases are the phases of a job with these settings, in order: the check when it needs one
// (a real erasure of every scope, not forced), then the steps its scope has.
func jobPhases(scope string, force, dryRun bool) []phase {
	var out []phase
	if scope == ErasureScopeAll && !force && !dryRun {
		out = append(out,
			phase{name: checkPhase, table: "event_payloads", checkSQL: qInboundToPayloads},
			phase{name: checkPhase + ":webhook_events", table: "webhook_events", checkSQL: qInboundToLegacy})
	}
	for i := range erasureSteps {
		st := &erasureSteps[i]
		if scope == ErasureScopeInbound && !st.inbound {
			continue
		}
		out = append(out, phase{name: st.table, table: st.table, step: st})
	}
	return out
}

// progress sets Phases and PhasesDone from the job's settings and phase.
func (j *ErasureJob) progress() {
	phases := jobPhases(j.Scope, j.Force, j.DryRun)
	j.Phases, j.PhasesDone = len(phases), 0
	for i, p := range phases {
		if p.name == j.Phase {
			j.PhasesDone = i
		}
	}
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

// batch runs one block range of one phase in one transaction with the job's cursor, counts and
// lease, and moves the cursor past it.
func (r *jobRun) batch(ctx context.Context, p phase, rel string, lo, hi int64) error {
	job := r.job
	var inboundTo int64
	err := pgx.BeginFunc(ctx, r.s.pool, func(tx pgx.Tx) error {
		w := &eraser{tx: tx, m: r.m, hasher: r.s.hasher, likes: r.likes, counts: map[string]int64{},
			inboundOnly: job.Scope == ErasureScopeInbound}
		if p.step != nil {
			if err := p.step.run(w, ctx, rel, lo, hi); err != nil {
				return err
			}
		} else if err := w.countInboundIn(ctx, rel, p.checkSQL, lo, hi); err != nil {
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
		tag, err := tx.Exec(ctx, qMoveErasureJob, job.ID, r.owner, erasureLease.Seconds(), p.name, rel, hi, string(doc), w.inboundTo)
		if err != nil {
			return fmt.Errorf("move the job's cursor: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return ErrErasureBusy // the lease expired and another process took the job over
		}
		job.Counts, inboundTo = counts, w.inboundTo
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s %s [%d, %d): %w", p.name, rel, lo, hi, err)
	}
	// What the commit wrote to the job's row, so the run goes on without reading it back.
	job.Phase, job.relation, job.nextBlock = p.name, rel, hi
	job.Batches++
	job.InboundTo += inboundTo
	job.Total = 0
	for _, n := range job.Counts {
		job.Total += n
	}
	job.progress()
	if r.s.afterErasureBatch != nil {
		r.s.afterErasureBatch(*job)
	}
	return nil
}

// end ends the job without an audit row (refused), its seal dropped.
func (r *jobRun) end(ctx context.Context, status string) error {
	tag, err := r.s.pool.Exec(ctx, qFinishErasureJob, r.job.ID, r.owner, status, nil)
	if err == nil && tag.RowsAffected() != 1 {
		err = ErrErasureBusy
	}
	if err != nil {
		return fmt.Errorf("end the job: %w", err)
	}
	r.job.Status = status
	return nil
}

func scanErasureJob(row pgx.Row) (ErasureJob, error) {
	var (
		j         ErasureJob
		counts    []byte
		erasureID *int64
		errText   *string
	)
	err := row.Scan(&j.ID, &j.Status, &j.AddressHash, &j.ErasedBy, &j.Reason, &j.Scope, &j.Force, &j.DryRun,
		&j.Phase, &j.relation, &j.nextBlock, &counts, &j.InboundTo, &j.Batches, &erasureID, &errText,
		&j.CreatedAt, &j.UpdatedAt, &j.FinishedAt)
	if err != nil {
		return ErasureJob{}, err
	}
	if err := json.Unmarshal(counts, &j.Counts); err != nil {
		return ErasureJob{}, fmt.Errorf("counts: %w", err)
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
	j.progress()
	return j, nil
}

// SQL of the erasure jobs.
const (
	jobColumns = `id, status, address_hash, erased_by, reason, scope, force, dry_run, phase, relation, next_block,
       counts::text, inbound_to, batches, erasure_id, error, created_at, updated_at, finished_at`

	// One running job per address (erasure_jobs_running_idx): a second request finds no row
	// here, and joins the running one.
	qInsertErasureJob = `
INSERT INTO erasure_jobs (address_hash, scope, force, dry_run, erased_by, reason, status, sealed_address, counts)
VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8::jsonb)
ON CONFLICT (address_hash) WHERE status = 'running' DO NOTHING
RETURNING id`

	qRunningErasureJob = `SELECT id FROM erasure_jobs WHERE address_hash = $1 AND status = 'running'`

	qGetErasureJob = `SELECT ` + jobColumns + ` FROM erasure_jobs WHERE id = $1`

	// The lease is free when no process holds it or its holder stopped renewing it.
	qClaimErasureJob = `
UPDATE erasure_jobs SET claimed_by = $2, claimed_until = now() + make_interval(secs => $3), updated_at = now()
WHERE id = $1 AND status = 'running' AND (claimed_until IS NULL OR claimed_until < now())
RETURNING ` + jobColumns

	qOrphanErasureJob = `
SELECT id, address_hash, sealed_address FROM erasure_jobs
WHERE status = 'running' AND (claimed_until IS NULL OR claimed_until < now())
ORDER BY id LIMIT 1`

	qMoveErasureJob = `
UPDATE erasure_jobs
SET claimed_until = now() + make_interval(secs => $3), phase = $4, relation = $5, next_block = $6,
    counts = $7::jsonb, inbound_to = inbound_to + $8, batches = batches + 1, updated_at = now()
WHERE id = $1 AND claimed_by = $2 AND status = 'running'`

	qFinishErasureJob = `
UPDATE erasure_jobs
SET status = $3, erasure_id = $4, sealed_address = NULL, phase = '', claimed_by = NULL, claimed_until = NULL,
    finished_at = now(), updated_at = now()
WHERE id = $1 AND claimed_by = $2 AND status = 'running'`

	qReleaseErasureJob = `
UPDATE erasure_jobs SET claimed_by = NULL, claimed_until = NULL, updated_at = now()
WHERE id = $1 AND claimed_by = $2 AND status = 'running'`

	qFailErasureJob = `
UPDATE erasure_jobs
SET status = 'failed', error = $2, sealed_address = NULL, claimed_by = NULL, claimed_until = NULL,
    finished_at = now(), updated_at = now()
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

	qInsertErasure = `
INSERT INTO erasures (address_hash, erased_by, reason, counts, total, took_ms)
VALUES ($1, $2, $3, $4::jsonb, $5, $6)
RETURNING id, erased_at`
)
