package eventlogtest

import (
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// The linearizability check: several clients (spread over the hosts of a
// shared log) append batches with command ids and read receipts at once,
// and the history of their calls, each with the times it was made and
// returned, must be one a single sequential log could have given, each
// call taking effect at one instant between the two (porcupine checks
// it). In that log an append takes the next sequences and stores its
// receipt, and a receipt read returns the stored receipt or not-found: a
// read that began after an append returned must see its receipt, however
// the log spreads its writes.

// appendCall is an append of n events under a command id; appendResult
// is the sequences it was given.
type appendCall struct {
	cmd string
	n   int
}

type appendResult struct{ first, last uint64 }

// receiptCall reads a command's receipt; receiptResult is what it got.
type receiptCall struct{ cmd string }

type receiptResult struct {
	receipt string
	found   bool
}

// logState is the sequential log's state: its last sequence and the
// receipts it holds. A step returns a new state and leaves the old as it
// was (porcupine needs its model to be pure).
type logState struct {
	last     uint64
	receipts map[string]string
}

// logModel is the sequential log porcupine checks a history against.
var logModel = porcupine.Model{
	Init: func() any { return logState{receipts: map[string]string{}} },
	Step: func(state, input, output any) (bool, any) {
		st := state.(logState)
		switch in := input.(type) {
		case appendCall:
			out := output.(appendResult)
			if out.first != st.last+1 || out.last != st.last+uint64(in.n) {
				return false, st
			}
			next := logState{last: out.last, receipts: maps.Clone(st.receipts)}
			next.receipts[in.cmd] = string(receiptOf(in.cmd, out.last))
			return true, next
		case receiptCall:
			out := output.(receiptResult)
			r, found := st.receipts[in.cmd]
			return found == out.found && r == out.receipt, st
		}
		panic(fmt.Sprintf("linearizability model: unknown call %T", input))
	},
	Equal: func(a, b any) bool {
		x, y := a.(logState), b.(logState)
		return x.last == y.last && maps.Equal(x.receipts, y.receipts)
	},
	Hash: func(state any) uint64 {
		st := state.(logState)
		return st.last<<16 ^ uint64(len(st.receipts))
	},
	DescribeOperation: func(input, output any) string {
		switch in := input.(type) {
		case appendCall:
			out := output.(appendResult)
			return fmt.Sprintf("append %s (%d events) -> %d..%d", in.cmd, in.n, out.first, out.last)
		case receiptCall:
			out := output.(receiptResult)
			if !out.found {
				return fmt.Sprintf("receipt %s -> not found", in.cmd)
			}
			return fmt.Sprintf("receipt %s -> %s", in.cmd, out.receipt)
		}
		return fmt.Sprint(input, output)
	},
}

// Linearizability workload: clients run opsPerClient calls each. Every
// third is an append of one to three events; the one after it reads the
// receipt the client just made (a read that must see it); the next waits
// for the next client's append of two calls back to return and reads its
// receipt at once (on another host, for a shared log: a read that must
// see it, made as soon as it must); every fifth call reads a receipt
// never made. Appends run concurrently on every client.
const (
	clients      = 6
	opsPerClient = 30
	// checkBound is how long porcupine may search: the workload's
	// histories take it milliseconds, as every append's result pins its
	// place in the order.
	checkBound = 20 * time.Second
)

// history runs the workload on the logs (client c on logs[c%len(logs)])
// and returns the calls it made.
func history(t *testing.T, logs []eventlog.Log) []porcupine.Operation {
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu  sync.Mutex
		ops []porcupine.Operation
		wg  sync.WaitGroup
	)
	// returned[c][i] is closed once client c's call i has returned and
	// its return time is taken (or the client has stopped, failing the
	// test). A call waits only for a call two back of another client,
	// which never waits itself: no cycle.
	returned := make([][]chan struct{}, clients)
	for c := range returned {
		returned[c] = make([]chan struct{}, opsPerClient)
		for i := range returned[c] {
			returned[c][i] = make(chan struct{})
		}
	}
	for c := range clients {
		l := logs[c%len(logs)]
		wg.Go(func() {
			var mine []porcupine.Operation
			next := 0 // this client's first call whose channel is open
			defer func() {
				for ; next < opsPerClient; next++ {
					close(returned[c][next])
				}
				mu.Lock()
				ops = append(ops, mine...)
				mu.Unlock()
			}()
			appended := ""
			for i := range opsPerClient {
				var in, out any
				var call int64
				switch {
				case i%5 == 4:
					in = receiptCall{cmd: fmt.Sprintf("never-%d-%d", c, i)}
					call = now()
					out = readReceipt(t, l, in.(receiptCall))
				case i%3 == 0:
					cmd, n := fmt.Sprintf("c%d-%d", c, i), 1+i%3+c%2
					in = appendCall{cmd: cmd, n: n}
					call = now()
					recs, _, err := l.Append(eventlog.Batch{Events: events("lin"+cmd, 0, n), CommandID: cmd,
						Receipt: func(last uint64) []byte { return receiptOf(cmd, last) }})
					if err != nil || len(recs) != n {
						t.Errorf("client %d: append %s: %d records, %v", c, cmd, len(recs), err)
						return
					}
					out = appendResult{first: recs[0].Sequence, last: recs[n-1].Sequence}
					appended = cmd
				case i%3 == 1:
					in = receiptCall{cmd: appended}
					call = now()
					out = readReceipt(t, l, in.(receiptCall))
				default:
					// Call i-2 of the next client is an append (or a read
					// of a receipt never made, when it is a fifth call).
					other := (c + 1) % clients
					<-returned[other][i-2]
					in = receiptCall{cmd: fmt.Sprintf("c%d-%d", other, i-2)}
					call = now()
					out = readReceipt(t, l, in.(receiptCall))
				}
				if out == nil {
					return
				}
				mine = append(mine, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: now()})
				close(returned[c][i])
				next = i + 1
			}
		})
	}
	wg.Wait()
	return ops
}

// readReceipt reads a receipt for the history; nil when the read failed
// (the test is failed then).
func readReceipt(t *testing.T, l eventlog.Log, in receiptCall) any {
	r, found, err := l.Receipt(in.cmd)
	if err != nil {
		t.Errorf("receipt of %s: %v", in.cmd, err)
		return nil
	}
	return receiptResult{receipt: string(r), found: found}
}

// checkHistory is porcupine's verdict on a history, and, when it is not
// Ok, a description for the failure message: the reads that missed a
// receipt whose append had returned before they began (the likeliest
// cause), then every call.
func checkHistory(ops []porcupine.Operation) (porcupine.CheckResult, string) {
	res := porcupine.CheckOperationsTimeout(logModel, ops, checkBound)
	if res == porcupine.Ok {
		return res, ""
	}
	returned := map[string]porcupine.Operation{}
	for _, op := range ops {
		if in, ok := op.Input.(appendCall); ok {
			returned[in.cmd] = op
		}
	}
	desc := "\nreads that missed a receipt whose append had returned:"
	for _, op := range ops {
		in, ok := op.Input.(receiptCall)
		if a, made := returned[in.cmd]; ok && made && !op.Output.(receiptResult).found && a.Return < op.Call {
			desc += fmt.Sprintf("\n  client %d read %s %v after client %d's append of it returned", op.ClientId, in.cmd,
				time.Duration(op.Call-a.Return), a.ClientId)
		}
	}
	desc += "\nevery call (times in ns from the start):"
	for _, op := range ops {
		desc += fmt.Sprintf("\n  client %d [%d, %d] %s", op.ClientId, op.Call, op.Return, logModel.DescribeOperation(op.Input, op.Output))
	}
	return res, desc
}

// Concurrent appends and receipt reads (on every host, for a shared log)
// are linearizable.
// With the harness's Faults, they are so while what the log runs on
// fails and mends under them: the workload is the same, its calls only
// take longer, and a call that overlaps a slow one may take effect before
// or after it (porcupine tries both).
func testLinearizable(t *testing.T, h Harness) {
	logs := writers(t, h, h.Open(t), 3)
	stop := make(chan struct{})
	mended := make(chan struct{})
	if h.Faults != nil {
		// The faults run until the workload ends and are mended before
		// the check: the test owns the goroutine and waits for it.
		go func() {
			defer close(mended)
			h.Faults(t, stop)
		}()
	} else {
		close(mended)
	}
	ops := history(t, logs)
	close(stop)
	<-mended
	if t.Failed() {
		return
	}
	var longest time.Duration
	for _, op := range ops {
		longest = max(longest, time.Duration(op.Return-op.Call))
	}
	t.Logf("%d calls, the longest took %v", len(ops), longest)
	if res, desc := checkHistory(ops); res != porcupine.Ok {
		t.Fatalf("the history of %d appends and receipt reads is not one a sequential log could give (%s):%s", len(ops), res, desc)
	}
}
