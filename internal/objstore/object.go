package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/io/gocloud/blobfs"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3://, s3a:// and s3n:// locations
	"github.com/aws/smithy-go"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Object stores come through iceberg-go's gocloud IO (blobfs). Its own
// Rename and RenameNoReplace copy the object and check for the target
// before the copy, which is neither cheap nor atomic, so the gateway does
// not use them: it uploads every file straight to its location, where it
// appears whole when the upload completes, and creates a file only if it is
// absent with a conditional put (S3's If-None-Match: *, which gocloud's
// IfNotExist sends), which the store answers with 412 Precondition Failed
// when the key exists. Exactly one of several racing creators of a key
// succeeds, which is the file-system index catalog's compare-and-swap.

// isObjectStore reports whether fsys is an object store reached through
// gocloud.
func isObjectStore(fsys iceio.IO) bool {
	_, ok := fsys.(*blobfs.FileIO)
	return ok
}

// createObject starts the upload of location. With exclusive the upload
// fails at Close, with an error wrapping fs.ErrExist, when the key exists.
// The returned cancel aborts an upload that Close has not completed.
func createObject(ctx context.Context, fsys iceio.IO, location string, exclusive bool) (iceio.FileWriter, context.CancelFunc, error) {
	// The upload outlives the call that starts it, as the file does; only
	// Abort ends it early.
	uploadCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := fsys.(*blobfs.FileIO).NewWriter(uploadCtx, location, true, &blob.WriterOptions{IfNotExist: exclusive})
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("create %s: %w", location, err)
	}
	return w, cancel, nil
}

// closeObject completes an upload started by createObject.
func closeObject(w iceio.FileWriter, location string) error {
	err := w.Close()
	switch {
	case err == nil:
		return nil
	case refusedConditionalCreate(err):
		return fmt.Errorf("publish %s: %w (the object store refused the conditional create: %v)", location, fs.ErrExist, err)
	default:
		return fmt.Errorf("publish %s: %w", location, err)
	}
}

// refusedConditionalCreate reports whether err is the store's answer to a
// conditional create of a key that exists (412, PreconditionFailed). The
// S3 error code is checked as well as gocloud's classification: gocloud
// reads any operation error whose text contains "301" as a missing bucket
// (a redirect), and S3 request ids are hex strings that contain "301" now
// and then, so a lost race would now and then read as "not found".
func refusedConditionalCreate(err error) bool {
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "PreconditionFailed"
}

// readObjectDir lists one level of an object store "directory": the
// objects directly under dir/ and the common prefixes below it, which are
// its subdirectories. A directory marker (an empty object named dir/) is
// not an entry of its own directory.
func readObjectDir(ctx context.Context, fsys iceio.IO, dir string) ([]fs.DirEntry, error) {
	key, err := objectKey(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	prefix := strings.TrimRight(key, "/") + "/"
	if key == "" {
		prefix = ""
	}
	it := fsys.(*blobfs.FileIO).List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	var out []fs.DirEntry
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
		if obj.Key == prefix {
			continue
		}
		out = append(out, fs.FileInfoToDirEntry(objectInfo{
			name: path.Base(strings.TrimSuffix(obj.Key, "/")), size: obj.Size, modTime: obj.ModTime, dir: obj.IsDir,
		}))
	}
}

// objectKey returns the key of a scheme://bucket/key location. Keys are
// taken as written, without unescaping, as iceberg-go's IO takes them.
func objectKey(location string) (string, error) {
	_, rest, ok := strings.Cut(location, "://")
	if !ok {
		return "", fmt.Errorf("object store location %q has no scheme", location)
	}
	_, key, _ := strings.Cut(rest, "/")
	return key, nil
}

type objectInfo struct {
	name    string
	size    int64
	modTime time.Time
	dir     bool
}

func (o objectInfo) Name() string       { return o.name }
func (o objectInfo) Size() int64        { return o.size }
func (o objectInfo) ModTime() time.Time { return o.modTime }
func (o objectInfo) IsDir() bool        { return o.dir }
func (o objectInfo) Sys() any           { return nil }
func (o objectInfo) Mode() fs.FileMode {
	if o.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
