package config

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// EnvLogLevel overrides log.level, e.g. to turn on debug logs for one run; EnvLogFormat
// overrides log.format.
const (
	EnvLogLevel  = "MAILHOOK_LOG_LEVEL"
	EnvLogFormat = "MAILHOOK_LOG_FORMAT"
)

// Log configures the process's structured logs on stderr.
type Log struct {
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level"`
	// Format is json (default: one object a line, for a log pipeline) or text (key=value, for a
	// terminal: make run's config uses it).
	Format string `yaml:"format"`
}

// Text reports whether the logs are key=value text rather than JSON.
func (l Log) Text() bool { return l.Format == "text" }

// SlogLevel is Level as a slog.Level; Validate has checked it.
func (l Log) SlogLevel() slog.Level {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(l.Level))
	return lv
}

// Worker tunes the Temporal worker. Zero values keep the SDK's defaults, which suit most
// deployments; the knobs are for a worker that shares its host or a database that must not see
// more concurrent steps than it has connections for.
type Worker struct {
	// MaxConcurrentActivities bounds the regular activities (notification retries, the daily
	// reconciliation) running at once.
	MaxConcurrentActivities int `yaml:"max_concurrent_activities"`
	// MaxConcurrentLocalActivities bounds the local activities (the database steps and the
	// first notification attempt) running at once.
	MaxConcurrentLocalActivities int `yaml:"max_concurrent_local_activities"`
	// MaxConcurrentWorkflowTasks bounds the workflow tasks running at once.
	MaxConcurrentWorkflowTasks int `yaml:"max_concurrent_workflow_tasks"`
	// WorkflowTaskPollers and ActivityTaskPollers are the long polls kept open per task queue.
	WorkflowTaskPollers int `yaml:"workflow_task_pollers"`
	ActivityTaskPollers int `yaml:"activity_task_pollers"`
	// StopTimeout is how long a stopping worker (SIGTERM) lets running activities finish, such
	// as a sink POST, before cancelling them. Default: notify.attempt_timeout plus 5 s.
	StopTimeout time.Duration `yaml:"stop_timeout"`
	// DeadlockDetectionTimeout is how long a workflow task may run without yielding before the
	// SDK fails it as a deadlock (TMPRL1101); zero: the SDK's 1 s. mailhook's workflow code never
	// blocks, so the detector only fires on a machine starved of CPU, where the task would have
	// finished: the test suites, which share 2 cores with their own servers, raise it.
	DeadlockDetectionTimeout time.Duration `yaml:"deadlock_detection_timeout"`
}

func (c Config) validateProcess() error {
	var lv slog.Level
	// Empty is info: a Config built in code rather than loaded need not say.
	if err := lv.UnmarshalText([]byte(c.Log.Level)); err != nil && c.Log.Level != "" {
		return fmt.Errorf("config: log.level %q (or %s) must be debug, info, warn or error", c.Log.Level, EnvLogLevel)
	}
	if f := c.Log.Format; f != "" && f != "json" && f != "text" {
		return fmt.Errorf("config: log.format %q (or %s) must be json or text", f, EnvLogFormat)
	}
	w := c.Worker
	for key, v := range map[string]int{
		"max_concurrent_activities": w.MaxConcurrentActivities, "max_concurrent_local_activities": w.MaxConcurrentLocalActivities,
		"max_concurrent_workflow_tasks": w.MaxConcurrentWorkflowTasks, "workflow_task_pollers": w.WorkflowTaskPollers,
		"activity_task_pollers": w.ActivityTaskPollers,
	} {
		if v < 0 {
			return fmt.Errorf("config: worker.%s must not be negative (0: the SDK's default)", key)
		}
	}
	// The SDK refuses a single workflow task poller (it needs one for the sticky queue too).
	if w.WorkflowTaskPollers == 1 {
		return fmt.Errorf("config: worker.workflow_task_pollers must be at least 2 (or 0: the SDK's default)")
	}
	if w.StopTimeout < 0 {
		return fmt.Errorf("config: worker.stop_timeout must not be negative")
	}
	if w.DeadlockDetectionTimeout < 0 {
		return fmt.Errorf("config: worker.deadlock_detection_timeout must not be negative (0: the SDK's 1s)")
	}
	return nil
}

func normalizeLevel(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// applyProcessDefaults fills what depends on other keys or on the environment after the file.
func (c *Config) applyProcessDefaults() {
	if v := os.Getenv(EnvLogLevel); v != "" {
		c.Log.Level = v
	}
	c.Log.Level = normalizeLevel(c.Log.Level)
	if v := os.Getenv(EnvLogFormat); v != "" {
		c.Log.Format = v
	}
	c.Log.Format = normalizeLevel(c.Log.Format)
	if c.Worker.StopTimeout == 0 {
		// A sink POST in flight at SIGTERM gets its whole attempt.
		c.Worker.StopTimeout = c.Notify.AttemptTimeout + 5*time.Second
	}
}
