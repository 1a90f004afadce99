package httpapi

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

func randomBody(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func freeChunks(a *bodyArena) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.free)
}

func TestReadBodyThroughTheArena(t *testing.T) {
	const max = 1 << 20
	b := NewReadingBudget(4*max, max)
	if b.arena == nil {
		t.Fatal("no arena: anonymous memory could not be mapped on this machine")
	}
	all := freeChunks(b.arena)
	for _, n := range []int{arenaChunk + 1, 3*arenaChunk - 7, max} {
		want := randomBody(t, n)
		got, err := b.ReadBody(bytes.NewReader(want), int64(n), max)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("declared %d bytes: read %d bytes, err %v; want the body back", n, len(got), err)
		}
		// Undeclared (chunked): read up to where it ends, at most max.
		got, err = b.ReadBody(http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(bytes.NewReader(want)), max), -1, max)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("undeclared %d bytes: read %d bytes, err %v; want the body back", n, len(got), err)
		}
		if free := freeChunks(b.arena); free != all {
			t.Fatalf("after a %d-byte body %d of %d chunks are free: a read kept its chunks", n, free, all)
		}
	}
	var tooLarge *http.MaxBytesError
	_, err := b.ReadBody(http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(bytes.NewReader(randomBody(t, max+1))), max), -1, max)
	if !errors.As(err, &tooLarge) {
		t.Fatalf("an undeclared body one byte over max: err %v, want *http.MaxBytesError", err)
	}
	// A read cut short (a deadline, a client gone) fails and gives its chunks back.
	cut := io.MultiReader(bytes.NewReader(randomBody(t, 5*arenaChunk)), iotestErrReader{errors.New("i/o timeout")})
	if _, err := b.ReadBody(cut, max, max); err == nil || err.Error() != "i/o timeout" {
		t.Fatalf("a body cut after 5 chunks: err %v, want the read's error", err)
	}
	if _, err := b.ReadBody(bytes.NewReader(randomBody(t, 100)), max, max); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a body shorter than declared: err %v, want io.ErrUnexpectedEOF", err)
	}
	if free := freeChunks(b.arena); free != all {
		t.Fatalf("after failed reads %d of %d chunks are free", free, all)
	}
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// When the arena is full (uploads cut but still returning from their reads), a body is read into
// the heap instead of being refused.
func TestReadBodyWithTheArenaFull(t *testing.T) {
	const max = 1 << 20
	b := NewReadingBudget(max, max)
	held := b.arena.take(freeChunks(b.arena))
	want := randomBody(t, max)
	got, err := b.ReadBody(bytes.NewReader(want), max, max)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("with no chunk free: read %d bytes, err %v; want the body back from the heap", len(got), err)
	}
	b.arena.give(held)
	// Small bodies never take a chunk.
	if body, ok, _ := b.arena.read(bytes.NewReader(want[:arenaChunk]), arenaChunk, max); ok || body != nil {
		t.Fatal("a body of one chunk or less went through the arena")
	}
	var nilBudget *ReadingBudget
	if got, err := nilBudget.ReadBody(bytes.NewReader(want), max, max); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("no budget: read %d bytes, err %v", len(got), err)
	}
}

// Bodies read at once never share a chunk (run with -race, as make test does).
func TestReadBodyConcurrently(t *testing.T) {
	const max = 256 << 10
	b := NewReadingBudget(8*max, max)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				want := bytes.Repeat([]byte{byte(g), byte(i)}, (max-g*1000)/2)
				got, err := b.ReadBody(bytes.NewReader(want), int64(len(want)), max)
				if err != nil || !bytes.Equal(got, want) {
					errs <- errors.New("a body read at once with others came back changed")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if free, all := freeChunks(b.arena), len(b.arena.mem)/arenaChunk; free != all {
		t.Fatalf("%d of %d chunks free after every read ended", free, all)
	}
}
