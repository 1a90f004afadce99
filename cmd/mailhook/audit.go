package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

// auditCLI records an operator action made with the CLI in the audit trail, once, when it has
// ended (err is how), as the API records its own (docs/operations/audit.md). A trail that
// cannot be written is said on stderr; the action stands.
func auditCLI(c *cobra.Command, a *store.Audit, e store.AuditEntry, err error) {
	e.Via, e.Actor = store.AuditViaCLI, cliActor()
	if e.Status == 0 {
		e.Status = cliStatus(err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context()), 5*time.Second)
	defer cancel()
	if _, aerr := a.RecordAudit(ctx, e); aerr != nil {
		fmt.Fprintf(c.ErrOrStderr(), "mailhook: the audit trail was not written: %v\n", aerr)
	}
}

// cliStatus is the HTTP status the API would have answered for err: the trail reads the same
// whichever way an action came.
func cliStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, context.Canceled):
		// The caller stopped waiting; what it started (an erasure's job) goes on.
		return http.StatusAccepted
	case errors.Is(err, domain.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrOtherErasureRunning):
		return http.StatusConflict
	case errors.Is(err, store.ErrInvalidAddress), errors.Is(err, store.ErrInvalidErasureScope):
		return http.StatusBadRequest
	}
	var shared *store.SharedAddressError
	if errors.As(err, &shared) {
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}
