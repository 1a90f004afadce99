package testenv

import (
	"log/slog"
	"os"
)

// quietLogger keeps SDK chatter out of test output unless MAILHOOK_TEST_VERBOSE is set.
func quietLogger() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("MAILHOOK_TEST_VERBOSE") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Logger is the logger tests give mailhook's own components.
func Logger() *slog.Logger { return quietLogger() }
