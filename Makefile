# mailhook developer and CI entry points.
#
#   make build        build bin/mailhook and bin/mailhook-loadtest (the load generator)
#   make run          local Temporal dev server + PostgreSQL, migrate, serve
#   make test         everything CI runs (.ci/run calls this)
#   make test-short   quick unit tests, no external services
#   make helm-check   the Helm chart, offline: lint, render, strict decoding, config (scripts/check-helm.sh)
#   make fmt | vet | clean
#   make temporal-stop   stop the dev Temporal server started by `make run`

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
.DEFAULT_GOAL := build

GO ?= go
BIN := bin/mailhook
CMD := ./cmd/mailhook
# The load generator is a binary of its own so the server does not carry it (docs/BENCHMARKS.md).
LOADTEST_BIN := bin/mailhook-loadtest
LOADTEST_CMD := ./cmd/mailhook-loadtest
# Stamped into `mailhook version` and mailhook_build_info.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit too, for builds where Go's own VCS stamp is missing (-buildvcs=false, no .git).
REVISION ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X github.com/mailhook/mailhook/internal/buildinfo.version=$(VERSION) -X github.com/mailhook/mailhook/internal/buildinfo.revision=$(REVISION)
# Go sources to format (NUL-separated), skipping VCS, vendor and dev state.
GO_FILES := find . \( -path ./.git -o -path ./vendor -o -path ./.dev -o -path ./bin \) -prune -o -name '*.go' -print0

.PHONY: build run test test-short record-histories fmt fmt-check tidy-check vet compose-check alerts-check helm-check \
	temporal-cli temporal-dev temporal-stop postgres clean clean-dev

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) $(CMD)
	$(GO) build -o $(LOADTEST_BIN) $(LOADTEST_CMD)

run:
	@# A second make run would start everything and only then fail on the ports: say so first.
	for port in 8000 8001; do
		if (exec 3<>/dev/tcp/127.0.0.1/$$port) 2>/dev/null; then
			echo "make run: 127.0.0.1:$$port is already in use (another make run?); stop it first" >&2
			exit 1
		fi
	done
	TEMPORAL_CLI="$$(scripts/ensure-temporal-cli.sh)"
	export TEMPORAL_CLI
	scripts/dev-temporal.sh
	scripts/ensure-postgres.sh
	scripts/ensure-brokers.sh nats
	echo "==> go build -o $(BIN) $(CMD)  (the first build compiles every dependency: a few minutes, silently)"
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) $(CMD)
	# Your own config: MAILHOOK_CONFIG=my.yaml make run, or an untracked deploy/mailhook.local.yaml
	# (a copy of the dev file with your endpoints), which make run prefers when it exists.
	if [[ -z "$${MAILHOOK_CONFIG:-}" && -f deploy/mailhook.local.yaml ]]; then
		MAILHOOK_CONFIG=deploy/mailhook.local.yaml
	fi
	MAILHOOK_CONFIG=$${MAILHOOK_CONFIG:-deploy/mailhook.dev.yaml}
	export MAILHOOK_CONFIG
	echo "==> $(BIN) migrate"
	$(BIN) migrate
	# The dev sink prints every notification (verified) in this terminal; it stops with serve.
	$(BIN) dev-sink --nats nats://127.0.0.1:4222 --nats-subject mailhook.dev &
	sink=$$!
	trap 'kill $$sink 2>/dev/null' EXIT
	echo
	echo "Webhook URL:  http://127.0.0.1:8000/webhooks/postscale   (config: $$MAILHOOK_CONFIG)"
	echo "Temporal UI:  http://127.0.0.1:8233"
	echo "Admin API:    curl -H 'Authorization: Bearer dev-admin-token' http://127.0.0.1:8000/v1/suppressions"
	echo "Console:      http://127.0.0.1:8000/console   (sign in with dev-admin-token)"
	echo "Simulate:     $(BIN) simulate   (in another terminal; the notifications print here)"
	echo "Other commands in another terminal: export MAILHOOK_CONFIG=$$MAILHOOK_CONFIG first"
	echo
	$(BIN) serve

# Everything CI runs. Fails (never skips) when PostgreSQL, PgBouncer, the Temporal CLI, the real
# Temporal server, docker-compose, promtool or helm cannot be had.
test: vet fmt-check tidy-check
	@scripts/ensure-postgres.sh
	scripts/check-pg-connections.sh
	scripts/ensure-pgbouncer.sh
	scripts/ensure-brokers.sh
	TEMPORAL_CLI="$$(scripts/ensure-temporal-cli.sh)"
	export TEMPORAL_CLI
	# The real Temporal server one e2e test runs against: built once, cached outside the repo.
	echo "==> real Temporal server: $$(scripts/temporal-server.sh build)"
	# The previous release the upgrade test runs beside this tree: built once from the repo's history.
	echo "==> previous release: $$(scripts/previous-release.sh)"
	# helm for the chart's tests (deploy/helm): built once, cached outside the repo. An
	# assignment, so a failed build stops here.
	HELM="$$(scripts/check-helm.sh helm)"
	echo "==> helm: $$HELM"
	# Chromium and playwright-core for the console's browser test (internal/e2e).
	echo "==> browser: $$(scripts/ensure-browser.sh)"
	echo "==> go test -race (TEMPORAL_CLI=$$TEMPORAL_CLI)"
	# -timeout is a hang guard, not a budget: a wait that stops moving fails in 90 s
	# (testenv.Stall), while a loaded machine only makes the suite slower (internal/e2e took
	# 16.6 min of the 20m it had at load 20-30 on a fresh 2-core machine, before another suite ran
	# beside it).
	# -p 2: two packages' tests at once, as on the 2-core machine, whatever its cores: the suite's
	# PostgreSQL connections are budgeted for internal/e2e and one other package
	# (docs/TESTING.md, "PostgreSQL connections").
	$(GO) test -race -count=1 -p 2 -timeout 60m ./...
	scripts/check-compose.sh
	scripts/check-alerts.sh
	scripts/check-helm.sh

# Record the workflow histories the replay test (workflows/replay_test.go) replays, into a new
# folder per recording. Run it when a change adds behaviour behind workflow.GetVersion; the
# folders of earlier recordings stay, so old histories keep replaying.
record-histories:
	@scripts/ensure-postgres.sh
	TEMPORAL_CLI="$$(scripts/ensure-temporal-cli.sh)"
	export TEMPORAL_CLI
	dir="$(CURDIR)/workflows/testdata/histories/$$(date -u +%Y-%m-%d)-$$(git rev-parse --short HEAD 2>/dev/null || echo local)"
	MAILHOOK_HISTORY_DIR="$$dir" $(GO) test -count=1 -run 'TestRecordScenarioHistories|TestRecordErasureHistories|TestAcceptanceThroughTemporal/postgres_stopped_under_load|TestScheduleTriggeredRunRedrivesAndWritesDailyCounts|TestDailyRunComparesProviderCounts|TestAReportTheSinkAcceptedAsPostgreSQLWentIsNotSentAgain' ./internal/e2e/
	echo "Recorded into $$dir; review with git status and commit it."

test-short:
	$(GO) test -short ./...

vet:
	$(GO) vet ./...

# go.mod and go.sum say exactly what the code imports (direct vs indirect included).
tidy-check:
	@if ! diff="$$($(GO) mod tidy -diff 2>&1)"; then
		echo "go.mod/go.sum are not tidy (run 'go mod tidy'):" >&2
		echo "$$diff" >&2
		exit 1
	fi
	echo "go mod tidy: ok"

fmt:
	$(GO_FILES) | xargs -0 -r gofmt -w

fmt-check:
	@unformatted="$$($(GO_FILES) | xargs -0 -r gofmt -l)"
	if [[ -n "$$unformatted" ]]; then
		echo "These files are not gofmt-formatted (run 'make fmt'):" >&2
		echo "$$unformatted" >&2
		exit 1
	fi
	echo "gofmt: ok"

compose-check:
	scripts/check-compose.sh

alerts-check:
	scripts/check-alerts.sh

helm-check:
	scripts/check-helm.sh

temporal-cli:
	scripts/ensure-temporal-cli.sh

temporal-dev:
	scripts/dev-temporal.sh

temporal-stop:
	scripts/dev-temporal.sh stop

postgres:
	scripts/ensure-postgres.sh

clean:
	rm -rf bin/ coverage.* cover.out *.coverprofile

# Also stops the dev Temporal server and deletes its state in .dev/.
clean-dev: clean
	scripts/dev-temporal.sh stop
	rm -rf .dev/
