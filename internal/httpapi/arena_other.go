//go:build !unix

package httpapi

import "errors"

// Elsewhere bodies are read into the heap (newBodyArena returns nil).
func mapAnonymous(int) ([]byte, error) { return nil, errors.New("no anonymous mappings here") }
