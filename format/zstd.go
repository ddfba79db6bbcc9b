package format

import (
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"

	"github.com/streamidx/streamidx/internal/procs"
)

// keptZstd is the Parquet ZSTD codec with encoders that outlive garbage
// collections. arrow-go's own keeps its encoders in a sync.Pool, which
// every other collection empties; a process that allocates as much as a
// merge does then makes a new encoder for nearly every page, and a new
// encoder allocates and clears its history (1 MiB) and tables: in a
// profile of a daemon rewriting a tail range file per commit, 70% of the
// compression's CPU. Here each level keeps up to two encoders per core in
// a free list, which the collector leaves alone. Decoding, streaming and
// bounds are arrow-go's codec's; the output is ordinary ZSTD frames either
// way, as every Parquet reader expects.
type keptZstd struct {
	compress.Codec // arrow-go's ZSTD codec
	mu             sync.Mutex
	free           map[zstd.EncoderLevel]chan *zstd.Encoder
}

func init() {
	base, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		panic(err) // arrow-go registers ZSTD in its own init
	}
	compress.RegisterCodec(compress.Codecs.Zstd, &keptZstd{Codec: base, free: map[zstd.EncoderLevel]chan *zstd.Encoder{}})
}

func (z *keptZstd) Encode(dst, src []byte) []byte {
	return z.EncodeLevel(dst, src, compress.DefaultCompressionLevel)
}

// EncodeLevel compresses src at a level of the zstd command line (1-22),
// as arrow-go's codec does.
func (z *keptZstd) EncodeLevel(dst, src []byte, level int) []byte {
	l := zstd.SpeedDefault
	if level != compress.DefaultCompressionLevel {
		l = zstd.EncoderLevelFromZstd(level)
	}
	free := z.list(l)
	var enc *zstd.Encoder
	select {
	case enc = <-free:
	default:
		var err error
		// The options of arrow-go's codec, so that pages compress the same.
		enc, err = zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(l),
			zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true))
		if err != nil {
			panic(err) // only for options out of range, which these are not
		}
	}
	out := enc.EncodeAll(src, dst[:0])
	select {
	case free <- enc:
	default: // as many kept as there are cores to use them
	}
	return out
}

func (z *keptZstd) list(l zstd.EncoderLevel) chan *zstd.Encoder {
	z.mu.Lock()
	defer z.mu.Unlock()
	free, ok := z.free[l]
	if !ok {
		free = make(chan *zstd.Encoder, 2*procs.Work())
		z.free[l] = free
	}
	return free
}

// DecodeWithError is the base codec's, which the page reader prefers to
// Decode (and finds only on a codec that has it).
func (z *keptZstd) DecodeWithError(dst, src []byte) ([]byte, error) {
	return compress.Decode(z.Codec, dst, src)
}

// The streaming side is the base codec's.

func (z *keptZstd) NewReader(r io.Reader) io.ReadCloser {
	return z.Codec.(compress.StreamingCodec).NewReader(r)
}

func (z *keptZstd) NewWriter(w io.Writer) io.WriteCloser {
	return z.Codec.(compress.StreamingCodec).NewWriter(w)
}

func (z *keptZstd) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	return z.Codec.(compress.StreamingCodec).NewWriterLevel(w, level)
}
