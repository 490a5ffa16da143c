package eventlogtest

import (
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// The model tells histories a sequential log could give from those it
// could not: the check is only as good as its power to fail.
func TestModel(t *testing.T) {
	appendOp := func(client int, cmd string, n int, call, ret int64, first uint64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: appendCall{cmd: cmd, n: n}, Call: call, Return: ret,
			Output: appendResult{first: first, last: first + uint64(n) - 1}}
	}
	readOp := func(client int, cmd string, call, ret int64, last uint64) porcupine.Operation {
		out := receiptResult{}
		if last > 0 {
			out = receiptResult{receipt: string(receiptOf(cmd, last)), found: true}
		}
		return porcupine.Operation{ClientId: client, Input: receiptCall{cmd: cmd}, Call: call, Return: ret, Output: out}
	}
	for _, c := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"a read after the append sees its receipt", []porcupine.Operation{
			appendOp(0, "c1", 2, 0, 10, 1), readOp(1, "c1", 20, 30, 2)}, porcupine.Ok},
		{"a read during the append may miss it", []porcupine.Operation{
			appendOp(0, "c1", 2, 0, 10, 1), readOp(1, "c1", 5, 30, 0)}, porcupine.Ok},
		{"a read after the append that misses it is stale", []porcupine.Operation{
			appendOp(0, "c1", 2, 0, 10, 1), readOp(1, "c1", 20, 30, 0)}, porcupine.Illegal},
		{"a receipt naming another sequence", []porcupine.Operation{
			appendOp(0, "c1", 2, 0, 10, 1), readOp(1, "c1", 20, 30, 3)}, porcupine.Illegal},
		{"a receipt before its append began", []porcupine.Operation{
			readOp(1, "c1", 0, 5, 2), appendOp(0, "c1", 2, 10, 20, 1)}, porcupine.Illegal},
		{"concurrent appends in either order", []porcupine.Operation{
			appendOp(0, "c1", 2, 0, 10, 2), appendOp(1, "c2", 1, 0, 10, 1)}, porcupine.Ok},
		{"two appends given one sequence", []porcupine.Operation{
			appendOp(0, "c1", 1, 0, 10, 1), appendOp(1, "c2", 1, 0, 10, 1)}, porcupine.Illegal},
		{"a gap", []porcupine.Operation{
			appendOp(0, "c1", 1, 0, 10, 1), appendOp(1, "c2", 1, 20, 30, 3)}, porcupine.Illegal},
		{"an append ordered after a later one", []porcupine.Operation{
			appendOp(0, "c1", 1, 0, 10, 2), appendOp(1, "c2", 1, 20, 30, 1)}, porcupine.Illegal},
	} {
		if got, _ := checkHistory(c.ops); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// staleReceipts is a log whose receipt reads miss the receipts of client
// 0's commands, as a host reading a replica that lags would.
type staleReceipts struct{ eventlog.Log }

func (s staleReceipts) Receipt(cmd string) ([]byte, bool, error) {
	if strings.HasPrefix(cmd, "c0-") {
		return nil, false, nil
	}
	return s.Log.Receipt(cmd)
}

// The workload reaches the reads that show a stale log: run on a log
// that drops receipts, its history fails the check (client 0 reads the
// receipt of each of its appends once the append has returned).
func TestStaleReadsFailTheCheck(t *testing.T) {
	open := func() eventlog.Log {
		s, err := eventlog.Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := open()
	if res, _ := checkHistory(history(t, []eventlog.Log{staleReceipts{s}})); res != porcupine.Illegal {
		t.Fatalf("a log that drops receipts: %s, want %s", res, porcupine.Illegal)
	}
	// The same workload on a log of its own passes: the failure above is
	// the dropped receipts'.
	if res, desc := checkHistory(history(t, []eventlog.Log{open()})); res != porcupine.Ok {
		t.Fatalf("the log: %s, want Ok:%s", res, desc)
	}
}
