package temporalconn_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/temporalconn"
)

// What a client built from the config sends on the wire: by default its requests to Temporal
// are not compressed (the SDK's own default is gzip); temporal.grpc_compression: gzip keeps the
// SDK's. A gRPC server of the test's own records each request's grpc-encoding header.
func TestRequestsToTemporalAreCompressedOnlyWhenAskedFor(t *testing.T) {
	for _, tt := range []struct {
		setting, want string
	}{
		{"", ""}, // the default
		{config.GrpcCompressionNone, ""},
		{config.GrpcCompressionGzip, "gzip"},
	} {
		t.Run("setting="+tt.setting, func(t *testing.T) {
			cfg := config.Defaults()
			if tt.setting != "" {
				cfg.Temporal.GrpcCompression = tt.setting
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			encodings := make(chan string, 16)
			srv := grpc.NewServer(grpc.StatsHandler(headerEncodings(encodings)),
				grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
					return status.Error(codes.Unimplemented, "test server")
				}))
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Stop()

			cfg.Temporal.Address = ln.Addr().String()
			opts, err := temporalconn.ClientOptions(cfg.Temporal, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Dial asks the server for its capabilities (GetSystemInfo); the test server answers
			// Unimplemented, as an old server would, which the SDK accepts.
			c, err := client.DialContext(ctx, opts)
			if err == nil {
				c.Close()
			}
			select {
			case got := <-encodings:
				if got != tt.want {
					t.Fatalf("grpc-encoding %q, want %q", got, tt.want)
				}
			case <-ctx.Done():
				t.Fatalf("the server saw no request (dial: %v)", err)
			}
		})
	}
	cfg := config.Defaults()
	cfg.Temporal.GrpcCompression = "zstd"
	if err := cfg.Validate(); err == nil {
		t.Fatal(`temporal.grpc_compression "zstd" accepted`)
	}
}

// headerEncodings reports the grpc-encoding of every request the server receives.
type headerEncodings chan string

func (headerEncodings) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (headerEncodings) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (headerEncodings) HandleConn(context.Context, stats.ConnStats) {}
func (h headerEncodings) HandleRPC(_ context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InHeader); ok {
		select {
		case h <- in.Compression:
		default: // a client that retries more than the buffer holds must not block the server
		}
	}
}
