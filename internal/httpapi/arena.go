package httpapi

import (
	"errors"
	"io"
	"sync"
)

// bodyArena holds the large webhook bodies being read, outside the Go heap. A body is read before
// it can be authenticated, and a heap buffer for it counts twice in the process's memory: once as
// itself and once more as the room the garbage collector's target (GOGC) gives the heap on top
// of everything live. Under a flood of stalled uploads the bodies being read are most of what is
// live, so the heap, and the RSS that follows its target, grows by twice http.max_reading_bytes.
// In fixed chunks of memory mapped once, the bodies count once, and the pages stay bounded by the
// arena's size. A body is copied to the heap only once it has been read whole.
//
// Chunks are owned by the goroutine reading into them until it gives them back, so an upload cut
// to make room (its budget freed at once, its read ended by a deadline) keeps its chunks for the
// moment its read takes to return; a body that finds no chunks free is read into the heap, as
// every body was before.
type bodyArena struct {
	mu   sync.Mutex
	mem  []byte
	free []int32 // chunk indexes
}

// arenaChunk is the arena's unit. Bodies no larger are read into the heap: most webhooks are a
// few KiB, and a whole chunk for each would hold the arena for little.
const arenaChunk = 16 << 10

// newBodyArena maps room for size bytes, or returns nil (every body then read into the heap)
// where memory cannot be mapped.
func newBodyArena(size int64) *bodyArena {
	n := (size + arenaChunk - 1) / arenaChunk
	if n <= 0 || n > 1<<31-1 {
		return nil
	}
	mem, err := mapAnonymous(int(n) * arenaChunk)
	if err != nil {
		return nil
	}
	a := &bodyArena{mem: mem, free: make([]int32, n)}
	for i := range a.free {
		a.free[i] = int32(i)
	}
	return a
}

// take returns the indexes of n chunks, or nil when fewer are free.
func (a *bodyArena) take(n int) []int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > len(a.free) {
		return nil
	}
	taken := append([]int32(nil), a.free[len(a.free)-n:]...)
	a.free = a.free[:len(a.free)-n]
	return taken
}

// give returns chunks taken from a.
func (a *bodyArena) give(chunks []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.free = append(a.free, chunks...)
}

func (a *bodyArena) chunk(i int32) []byte {
	return a.mem[int(i)*arenaChunk : (int(i)+1)*arenaChunk]
}

// read reads r's body, declared bytes long (or, when declared is negative, up to max bytes: the
// reader itself refuses more), into chunks of a and returns a heap copy of it. ok is false when
// the body is small or no chunks are free: the caller reads it itself.
func (a *bodyArena) read(r io.Reader, declared, max int64) (body []byte, ok bool, err error) {
	want := declared
	if want < 0 {
		want = max + 1 // room for the byte past max that has the reader refuse
	}
	if a == nil || want <= arenaChunk {
		return nil, false, nil
	}
	chunks := a.take(int((want + arenaChunk - 1) / arenaChunk))
	if chunks == nil {
		return nil, false, nil
	}
	defer a.give(chunks)
	var n int64
	for _, i := range chunks {
		c := a.chunk(i)
		c = c[:min(int64(len(c)), want-n)]
		m, err := io.ReadFull(r, c)
		n += int64(m)
		if err != nil {
			if declared < 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
				break // an undeclared body ends where its reader does
			}
			return nil, true, err
		}
	}
	body = make([]byte, n)
	for off, k := int64(0), 0; off < n; k++ {
		off += int64(copy(body[off:], a.chunk(chunks[k])))
	}
	return body, true, nil
}
