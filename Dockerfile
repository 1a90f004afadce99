# mailhook: `mailhook serve` (HTTP :8000 + Temporal worker), `mailhook migrate`,
# `mailhook simulate`. Built by docker-compose.yml; see it for the runtime env.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 \
    GOFLAGS=-buildvcs=false
# Dependencies first, so source edits don't invalidate the module cache layer.
COPY go.mod go.sum ./
RUN go mod download && go mod verify
COPY . .
# The version and commit `mailhook version` and mailhook_build_info report (the build has no
# .git; docker-compose.yml passes both from the environment).
ARG MAILHOOK_VERSION=dev
ARG MAILHOOK_REVISION=unknown
RUN go build -trimpath -ldflags="-s -w -X github.com/mailhook/mailhook/internal/buildinfo.version=${MAILHOOK_VERSION} -X github.com/mailhook/mailhook/internal/buildinfo.revision=${MAILHOOK_REVISION}" \
    -o /out/mailhook ./cmd/mailhook

# Static binary on distroless: CA certificates and tzdata, no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mailhook /usr/local/bin/mailhook
USER nonroot:nonroot
EXPOSE 8000
ENTRYPOINT ["/usr/local/bin/mailhook"]
CMD ["serve"]
