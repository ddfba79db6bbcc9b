package staging

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
)

// pipeChunkBytes is how many bytes of mutations a Pipe hands over at a
// time: small enough that the writer starts early and the chunks in flight
// stay a few hundred KiB, big enough that the hand-over costs nothing.
const pipeChunkBytes = 64 << 10

// pipeChunks is how many chunks a Pipe owns: one being filled, the others
// queued or being written.
const pipeChunks = 4

// Pipe feeds a Stager from another goroutine: Add copies a mutation into a
// chunk and returns, and a writer goroutine adds the chunks to the Stager,
// writing its batches to Pebble as they fill. A table delta computes its
// mutations while the previous ones are being written, on two cores instead
// of one after the other. Mutations add up whatever their order (Add), so
// the stage is the same as one written by the Stager directly.
//
// A Pipe belongs to one goroutine, like its Stager. Close waits for the
// writer; then the Stager is the caller's again (to Seal or Abort).
type Pipe struct {
	st     *Stager
	cur    []byte
	free   chan []byte
	full   chan []byte
	done   chan struct{}
	err    error       // the writer's first error, set before failed
	failed atomic.Bool // the writer met an error: Add returns it at once
	closed bool
}

// NewPipe starts the writer of st.
func NewPipe(st *Stager) *Pipe {
	p := &Pipe{st: st, free: make(chan []byte, pipeChunks), full: make(chan []byte, pipeChunks), done: make(chan struct{})}
	for range pipeChunks - 1 {
		p.free <- make([]byte, 0, pipeChunkBytes+256)
	}
	p.cur = make([]byte, 0, pipeChunkBytes+256)
	go p.write()
	return p
}

func (p *Pipe) write() {
	defer close(p.done)
	for chunk := range p.full {
		if p.err == nil {
			if p.err = p.addChunk(chunk); p.err != nil {
				p.failed.Store(true)
			}
		}
		p.free <- chunk[:0]
	}
}

// addChunk adds the mutations of one chunk, each a uvarint key length,
// uvarint value length, varint count, key and value.
func (p *Pipe) addChunk(chunk []byte) error {
	for len(chunk) > 0 {
		klen, n1 := binary.Uvarint(chunk)
		vlen, n2 := binary.Uvarint(chunk[n1:])
		count, n3 := binary.Varint(chunk[n1+n2:])
		if n1 <= 0 || n2 <= 0 || n3 <= 0 {
			return errors.New("staging pipe: corrupt chunk") // cannot happen: Add wrote it
		}
		chunk = chunk[n1+n2+n3:]
		key, val := chunk[:klen], chunk[klen:klen+vlen]
		chunk = chunk[klen+vlen:]
		if err := p.st.Add(key, val, int(count)); err != nil {
			return err
		}
	}
	return nil
}

// Add queues one mutation for the Stager (see Stager.Add); key and value
// are copied. An error the writer met is returned by an Add soon after
// (the next that hands a chunk over) and by Close.
func (p *Pipe) Add(key, value []byte, count int) error {
	if p.closed {
		return fmt.Errorf("add to stage %s@%d: pipe is closed", p.st.index, p.st.snap)
	}
	p.cur = binary.AppendUvarint(p.cur, uint64(len(key)))
	p.cur = binary.AppendUvarint(p.cur, uint64(len(value)))
	p.cur = binary.AppendVarint(p.cur, int64(count))
	p.cur = append(append(p.cur, key...), value...)
	if len(p.cur) < pipeChunkBytes {
		return nil
	}
	return p.handOver()
}

func (p *Pipe) handOver() error {
	if p.failed.Load() {
		return p.err
	}
	p.full <- p.cur
	p.cur = <-p.free
	return nil
}

// Close hands over what is left, waits for the writer and returns its first
// error. The Stager is the caller's again afterwards.
func (p *Pipe) Close() error {
	if p.closed {
		<-p.done
		return p.err
	}
	p.closed = true
	if len(p.cur) > 0 {
		p.full <- p.cur
		p.cur = nil
	}
	close(p.full)
	<-p.done
	return p.err
}
