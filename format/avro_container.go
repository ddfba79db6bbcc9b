package format

import (
	"bufio"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// The Avro object container file (Avro 1.11 specification, "Object
// Container Files"): a header of magic, metadata map and sync marker, then
// blocks of a record count, a byte size, the records (compressed by the
// codec) and the sync marker again. streamidx writes and reads the
// container itself: hamba/avro's ocf package drops custom schema attributes
// such as field-id unless told otherwise, and its reader allocates whatever
// block size a file claims.
const (
	codecNull    = "null"
	codecDeflate = "deflate"

	// avroBlockTarget is the uncompressed size at which the writer closes a
	// data block.
	avroBlockTarget = 1 << 20
	// avroMaxBlockBytes bounds a data block, compressed and uncompressed, in
	// the writer and the reader alike, so that a corrupt size field cannot
	// make the reader allocate without bound.
	avroMaxBlockBytes = 64 << 20
	// avroMaxHeaderBytes bounds the header's metadata map.
	avroMaxHeaderBytes = 16 << 20
)

var avroMagic = []byte("Obj\x01")

// avroContainerWriter writes an object container file: the header at once,
// then the records appended to it in blocks of about avroBlockTarget bytes.
type avroContainerWriter struct {
	w     io.Writer
	codec string
	sync  []byte
	block []byte
	count int
}

// newAvroContainerWriter writes the header with the metadata meta (which
// must hold avro.schema and avro.codec). The sync marker is derived from the
// header, so the output is a function of the input and golden files compare
// byte for byte.
func newAvroContainerWriter(w io.Writer, meta map[string][]byte, codec string) (*avroContainerWriter, error) {
	if codec != codecDeflate && codec != codecNull {
		return nil, fmt.Errorf("codec %q is neither %q nor %q", codec, codecDeflate, codecNull)
	}
	header := append([]byte{}, avroMagic...)
	header = appendAvroMetadata(header, meta)
	digest := sha256.Sum256(header)
	sync := digest[:16]
	header = append(header, sync...)
	if _, err := w.Write(header); err != nil {
		return nil, err
	}
	return &avroContainerWriter{w: w, codec: codec, sync: sync}, nil
}

// append adds one encoded record, closing the block once it reaches
// avroBlockTarget. With records of at most half of avroMaxBlockBytes no
// block exceeds what readers accept, even after deflate's few bytes of
// overhead; the caller keeps to that.
func (cw *avroContainerWriter) append(rec []byte) error {
	cw.block = append(cw.block, rec...)
	cw.count++
	if len(cw.block) >= avroBlockTarget {
		return cw.flush()
	}
	return nil
}

// flush writes the open block, if it holds any record.
func (cw *avroContainerWriter) flush() error {
	if cw.count == 0 {
		return nil
	}
	data := cw.block
	if cw.codec == codecDeflate {
		var buf bytes.Buffer
		fw, err := flate.NewWriter(&buf, flate.DefaultCompression)
		if err != nil {
			return fmt.Errorf("compress block: %w", err)
		}
		if _, err := fw.Write(cw.block); err != nil {
			return fmt.Errorf("compress block: %w", err)
		}
		if err := fw.Close(); err != nil {
			return fmt.Errorf("compress block: %w", err)
		}
		data = buf.Bytes()
	}
	out := binary.AppendVarint(nil, int64(cw.count))
	out = binary.AppendVarint(out, int64(len(data)))
	out = append(append(out, data...), cw.sync...)
	cw.block, cw.count = cw.block[:0], 0
	_, err := cw.w.Write(out)
	return err
}

// avroContainerReader reads an object container file block by block.
type avroContainerReader struct {
	br      *bufio.Reader
	meta    map[string][]byte
	sync    []byte
	codec   string
	blockNo int
}

// newAvroContainerReader reads the header and checks its codec.
func newAvroContainerReader(br *bufio.Reader) (*avroContainerReader, error) {
	meta, sync, err := readAvroHeader(br)
	if err != nil {
		return nil, err
	}
	codec := codecNull
	if v, ok := meta["avro.codec"]; ok {
		codec = string(v)
	}
	if codec != codecNull && codec != codecDeflate {
		return nil, fmt.Errorf("unsupported codec %q", codec)
	}
	return &avroContainerReader{br: br, meta: meta, sync: sync, codec: codec}, nil
}

// next returns the record count and the uncompressed records of the next
// block, or io.EOF after the last one. The count is checked against the
// bytes: every record the caller decodes takes at least one, which bounds
// the records a block can claim.
func (cr *avroContainerReader) next() (int64, []byte, error) {
	n := cr.blockNo
	if _, err := cr.br.Peek(1); err == io.EOF {
		return 0, nil, io.EOF
	}
	cr.blockNo++
	count, err := binary.ReadVarint(cr.br)
	if err != nil {
		return 0, nil, fmt.Errorf("block %d: read record count: %w", n, eofAsTruncated(err))
	}
	size, err := binary.ReadVarint(cr.br)
	if err != nil {
		return 0, nil, fmt.Errorf("block %d: read size: %w", n, eofAsTruncated(err))
	}
	if count < 0 || size < 0 || size > avroMaxBlockBytes {
		return 0, nil, fmt.Errorf("block %d: %d records in %d bytes is out of range", n, count, size)
	}
	data, err := readN(cr.br, size)
	if err != nil {
		return 0, nil, fmt.Errorf("block %d: read %d bytes: %w", n, size, err)
	}
	var marker [16]byte
	if _, err := io.ReadFull(cr.br, marker[:]); err != nil {
		return 0, nil, fmt.Errorf("block %d: read sync marker: %w", n, eofAsTruncated(err))
	}
	if !bytes.Equal(marker[:], cr.sync) {
		return 0, nil, fmt.Errorf("block %d: sync marker does not match the header's", n)
	}
	if cr.codec == codecDeflate {
		if data, err = inflate(data); err != nil {
			return 0, nil, fmt.Errorf("block %d: %w", n, err)
		}
	}
	if count > int64(len(data)) {
		return 0, nil, fmt.Errorf("block %d: %d records cannot fit in %d bytes", n, count, len(data))
	}
	return count, data, nil
}

func eofAsTruncated(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readN reads n bytes into a buffer that grows with the bytes that arrive,
// so that a size field larger than the file costs nothing.
func readN(r io.Reader, n int64) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(min(n, 64<<10)))
	if _, err := io.CopyN(&buf, r, n); err != nil {
		return nil, eofAsTruncated(err)
	}
	return buf.Bytes(), nil
}

func inflate(data []byte) ([]byte, error) {
	fr := flate.NewReader(bytes.NewReader(data))
	defer fr.Close()
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(fr, avroMaxBlockBytes+1))
	if err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	if n > avroMaxBlockBytes {
		return nil, fmt.Errorf("inflates to more than %d bytes", avroMaxBlockBytes)
	}
	return out.Bytes(), nil
}

// readAvroHeader reads the magic, the metadata map and the sync marker.
func readAvroHeader(br *bufio.Reader) (map[string][]byte, []byte, error) {
	magic := make([]byte, len(avroMagic))
	if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, avroMagic) {
		return nil, nil, errors.New("not an Avro object container file")
	}
	meta := map[string][]byte{}
	budget := int64(avroMaxHeaderBytes)
	readString := func() ([]byte, error) {
		n, err := binary.ReadVarint(br)
		if err != nil {
			return nil, eofAsTruncated(err)
		}
		if n < 0 || n > budget {
			return nil, fmt.Errorf("length %d is out of range", n)
		}
		budget -= n
		return readN(br, n)
	}
	for {
		n, err := binary.ReadVarint(br)
		if err != nil {
			return nil, nil, fmt.Errorf("read header metadata: %w", eofAsTruncated(err))
		}
		if n == 0 {
			break
		}
		if n < 0 {
			// A negative count is followed by the block's size in bytes.
			if n = -n; n < 0 {
				return nil, nil, errors.New("header metadata count is out of range")
			}
			if _, err := binary.ReadVarint(br); err != nil {
				return nil, nil, fmt.Errorf("read header metadata: %w", eofAsTruncated(err))
			}
		}
		for ; n > 0; n-- {
			key, err := readString()
			if err != nil {
				return nil, nil, fmt.Errorf("read header metadata key: %w", err)
			}
			val, err := readString()
			if err != nil {
				return nil, nil, fmt.Errorf("read header metadata %q: %w", key, err)
			}
			if _, dup := meta[string(key)]; dup {
				return nil, nil, fmt.Errorf("header metadata %q appears twice", key)
			}
			meta[string(key)] = val
		}
	}
	sync := make([]byte, 16)
	if _, err := io.ReadFull(br, sync); err != nil {
		return nil, nil, fmt.Errorf("read sync marker: %w", eofAsTruncated(err))
	}
	return meta, sync, nil
}

// appendAvroMetadata encodes the header's map<bytes> as one block with its
// keys sorted, so that equal maps give equal bytes.
func appendAvroMetadata(b []byte, meta map[string][]byte) []byte {
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendVarint(b, int64(len(keys)))
	for _, k := range keys {
		b = binary.AppendVarint(b, int64(len(k)))
		b = append(b, k...)
		b = binary.AppendVarint(b, int64(len(meta[k])))
		b = append(b, meta[k]...)
	}
	return binary.AppendVarint(b, 0)
}
