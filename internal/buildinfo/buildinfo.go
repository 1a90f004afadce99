// Package buildinfo says which build of mailhook is running: `mailhook version`, the
// mailhook_build_info metric and the start-up log line.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// version is stamped at build time (make build, the Dockerfile):
//
//	go build -ldflags "-X github.com/mailhook/mailhook/internal/buildinfo.version=v1.2.3"
var version string

// revision is stamped the same way (…/buildinfo.revision=<commit>) where Go's own VCS stamp is
// missing: the Dockerfile builds without .git (-buildvcs=false), and so may a packager.
var revision string

// Info is what identifies a build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"` // VCS commit, "-dirty" when built from a modified tree
	GoVersion string `json:"go_version"`
}

// Read returns the stamped version or, without one, what the Go toolchain recorded (the module
// version of `go install …@v1.2.3`, else the commit of the tree it was built from).
func Read() Info {
	info := Info{Version: version, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		info.Revision = revision
		return fill(info)
	}
	var rev string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && modified {
		rev += "-dirty"
	}
	info.Revision = rev
	if rev == "" {
		info.Revision = revision
	}
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	return fill(info)
}

func fill(info Info) Info {
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}
