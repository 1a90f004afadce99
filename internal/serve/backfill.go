package serve

import (
	"context"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/backfill"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

// BackfillAcceptor hands backfill the webhook's acceptance: a listed event is inserted exactly
// as its webhook's would be, and its verdict told in backfill's terms.
func BackfillAcceptor(a *acceptance.Acceptor) backfill.Acceptor { return backfillAcceptor{a} }

type backfillAcceptor struct{ a *acceptance.Acceptor }

func (b backfillAcceptor) Accept(ctx context.Context, evs []domain.Event) ([]backfill.Verdict, error) {
	vs, err := b.a.Accept(ctx, evs)
	if err != nil {
		return nil, err
	}
	out := make([]backfill.Verdict, len(vs))
	for i, v := range vs {
		out[i] = backfill.Verdict{Status: backfill.Rejected, Err: v.Err}
		switch v.Status {
		case acceptance.Accepted:
			out[i].Status = backfill.Accepted
		case acceptance.Duplicate:
			out[i].Status = backfill.Duplicate
		}
	}
	return out, nil
}

// BackfillProgress keeps backfill's checkpoints in the store's backfill_progress.
func BackfillProgress(st *store.Store) backfill.ProgressStore { return backfillProgress{st} }

type backfillProgress struct{ st *store.Store }

func (p backfillProgress) LoadBackfill(ctx context.Context, k backfill.Key) (backfill.Checkpoint, bool, error) {
	c, ok, err := p.st.Counts.LoadBackfill(ctx, store.BackfillKey(k))
	return backfill.Checkpoint(c), ok, err
}

func (p backfillProgress) SaveBackfill(ctx context.Context, k backfill.Key, c backfill.Checkpoint) error {
	return p.st.Counts.SaveBackfill(ctx, store.BackfillKey(k), store.BackfillProgress(c))
}
