package main

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
)

// bigThread is a thread of n ended runs, each with a user and an
// assistant message, a checkpoint and a request.
func bigThread(n int) domain.Thread {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	t := domain.Thread{ID: "thr", Provider: "acp", Cwd: "/w", ApprovalPolicy: domain.ApproveDecline, CreatedAt: at, UpdatedAt: at, Sequence: uint64(10 * n)}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("run_%d", i)
		end := at
		t.Runs = append(t.Runs, domain.Run{ID: id, Ordinal: i, Status: domain.RunStatusCompleted, Input: fmt.Sprintf("Step %d: add step %d to the log.", i, i),
			QueuedAt: at, StartedAt: &end, EndedAt: &end, StopReason: "end_turn"})
		t.Messages = append(t.Messages,
			domain.Message{ID: fmt.Sprintf("m%du", i), RunID: id, Role: domain.RoleUser, Text: domain.NewText(fmt.Sprintf("Step %d: add step %d to the log.", i, i)), Status: domain.StatusCompleted},
			domain.Message{ID: fmt.Sprintf("m%da", i), RunID: id, Role: domain.RoleAssistant, Text: domain.NewText(fmt.Sprintf("Logged step %d.", i)), Status: domain.StatusCompleted})
		t.Checkpoints = append(t.Checkpoints, domain.Checkpoint{ID: fmt.Sprintf("cp%d", i), RunID: id, RunOrdinal: i, Status: domain.CheckpointReady,
			Files: []domain.FileChange{{Path: "log.txt", Kind: "modified", Additions: 1}}})
	}
	return t
}

// baton show of a long thread (5,000 runs, 10,000 messages), from the
// API's message to its text: the CLI's part of a show, without the
// reading.
func BenchmarkShowThread(b *testing.B) {
	at := service.ThreadMessage(bigThread(5000))
	g := &globals{stdout: io.Discard}
	for b.Loop() {
		showThread(g, at)
	}
}
