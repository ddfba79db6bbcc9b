package staging

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashEnv names the store directory of the child process of
// TestStoreCrashRecovery.
const crashEnv = "STREAMIDX_STAGING_CRASH_DIR"

const crashIndex = "crash_idx"

// crashAdd is one Add call of a crash-test stage.
type crashAdd struct {
	key, value []byte
	count      int
}

// crashStage is the content of the crash-test stage of snapshot id, derived
// from id alone so the parent can check what the child wrote: the Add calls
// in order and what Iterate must report, in key order.
func crashStage(id int64) (adds []crashAdd, want []staged) {
	r := rand.New(rand.NewPCG(uint64(id), 7))
	return randomMutations(r, 1+r.IntN(8000), 0, 40)
}

// randomMutations makes the Add calls of n distinct entries with values of
// minValue up to minValue+spread-1 random bytes, in random order, a third
// of them added in two parts and some cancelling out, and what Iterate must
// report for them, in key order.
func randomMutations(r *rand.Rand, n, minValue, spread int) (adds []crashAdd, want []staged) {
	for i := range n {
		key := binary.BigEndian.AppendUint64(nil, r.Uint64())
		key = binary.AppendUvarint(key, uint64(i)) // distinct keys
		value := make([]byte, minValue+r.IntN(spread))
		for j := range value {
			value[j] = byte(r.Uint32())
		}
		total := []int{-2, -1, 0, 1, 1, 2}[r.IntN(6)]
		if r.IntN(3) == 0 { // the same entry added twice
			adds = append(adds, crashAdd{key, value, total + 1}, crashAdd{key, value, -1})
		} else {
			adds = append(adds, crashAdd{key, value, total})
		}
		if total != 0 {
			want = append(want, staged{string(key), string(value), total})
		}
	}
	r.Shuffle(len(adds), func(i, j int) { adds[i], adds[j] = adds[j], adds[i] })
	slices.SortFunc(want, func(a, b staged) int { return strings.Compare(a.key, b.key) })
	return adds, want
}

// crashChild is the process TestStoreCrashRecovery kills (the test binary,
// started with crashEnv set, runs it from TestMain): it cleans up partial
// stages, then stages, seals and drops old stages in a loop, printing
// "sealed ID" after each Seal returns. It returns only on an error.
func crashChild(dir string) error {
	s, err := OpenStore(dir, StoreOptions{MemTableSize: 1 << 20, BatchBytes: 32 << 10})
	if err != nil {
		return err
	}
	partial, err := s.Unsealed()
	if err != nil {
		return err
	}
	for _, p := range partial {
		if err := s.Abandon(p.Index, p.SourceSnapshotID); err != nil {
			return err
		}
	}
	sealed, err := s.Sealed(crashIndex)
	if err != nil {
		return err
	}
	var ids []int64
	for _, m := range sealed {
		ids = append(ids, m.SourceSnapshotID)
	}
	next := int64(1)
	if len(ids) > 0 {
		next = ids[len(ids)-1] + 1
	}
	for ; ; next++ {
		st, err := s.Stage(crashIndex, next)
		if err != nil {
			return err
		}
		adds, _ := crashStage(next)
		for _, a := range adds {
			if err := st.Add(a.key, a.value, a.count); err != nil {
				return err
			}
		}
		if err := st.Seal(SealMeta{Ordinal: uint64(next), Offsets: map[string]string{"p0": strconv.FormatInt(next, 10)}}); err != nil {
			return err
		}
		fmt.Printf("sealed %d\n", next)
		ids = append(ids, next)
		if len(ids) > 4 { // the compactor is done with the oldest
			if err := s.Drop(crashIndex, ids[0]); err != nil {
				return err
			}
			ids = ids[1:]
		}
	}
}

// TestStoreCrashRecovery kills a process that stages and seals in a loop
// with SIGKILL at random moments, 25 times, and checks after each restart
// that every sealed stage is complete, that every seal the child reported
// survived, and that a stage cut short is reported as unsealed.
func TestStoreCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 25 processes")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(11, 12))
	var totalSealed, partials int
	for trial := range 25 {
		acked := runAndKill(t, dir, time.Duration(r.IntN(150))*time.Millisecond)
		sealed, partial := checkCrashStore(t, dir, acked)
		totalSealed += sealed
		partials += partial
		if t.Failed() {
			t.Fatalf("trial %d: the store is not consistent", trial)
		}
	}
	t.Logf("25 kills: %d sealed stages checked, %d partial stages reported", totalSealed, partials)
}

// runAndKill starts the child, waits for its first seal, kills it after
// delay and returns the highest snapshot ID it reported sealed.
func runAndKill(t *testing.T, dir string, delay time.Duration) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	acked := int64(-1)
	readLine := func() bool {
		if !lines.Scan() {
			return false
		}
		if id, ok := strings.CutPrefix(lines.Text(), "sealed "); ok {
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				t.Errorf("child printed %q", lines.Text())
			}
			acked = max(acked, n)
		}
		return true
	}
	for acked < 0 && readLine() {
	}
	if acked < 0 {
		_ = cmd.Wait()
		t.Fatalf("the child stopped before sealing anything: %s", stderr.String())
	}
	time.Sleep(delay)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for readLine() { // seals reported before the kill
	}
	_, _ = io.Copy(io.Discard, out)
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != -1 {
		t.Fatalf("child ended with %v, want killed by a signal: %s", err, stderr.String())
	}
	return acked
}

// checkCrashStore reopens the store and checks it against crashStage.
func checkCrashStore(t *testing.T, dir string, acked int64) (sealed, partial int) {
	t.Helper()
	s, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	metas, err := s.Sealed(crashIndex)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, m := range metas {
		id := m.SourceSnapshotID
		ids = append(ids, id)
		adds, want := crashStage(id)
		net := 0
		for _, a := range adds {
			net += a.count
		}
		if m.Mutations != int64(len(adds)) || m.NetCount != int64(net) || m.Ordinal != uint64(id) || m.Offsets["p0"] != strconv.FormatInt(id, 10) {
			t.Errorf("seal of %d: %+v, want %d mutations, net count %d", id, m, len(adds), net)
		}
		got := collect(t, s, crashIndex, id)
		if !slices.Equal(got, want) {
			t.Errorf("sealed stage %d: %d mutations read back, want %d, or they differ", id, len(got), len(want))
		}
	}
	if !slices.Contains(ids, acked) {
		t.Errorf("stage %d was reported sealed before the kill and is not sealed after it (sealed: %v)", acked, ids)
	}
	refs, err := s.Unsealed()
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		if ref.Index != crashIndex || ref.SourceSnapshotID <= slices.Max(ids) {
			t.Errorf("unsealed stage %+v: only the stage after the last sealed one can be in flight (sealed: %v)", ref, ids)
		}
		if err := s.Iterate(ref.Index, ref.SourceSnapshotID, func([]byte, []byte, int) error { return nil }); !errors.Is(err, ErrStageNotSealed) {
			t.Errorf("Iterate of partial stage %+v: %v, want ErrStageNotSealed", ref, err)
		}
	}
	if len(refs) > 1 {
		t.Errorf("%d partial stages; the child writes one at a time", len(refs))
	}
	return len(metas), len(refs)
}
