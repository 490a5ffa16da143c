package orchestrator

import (
	"encoding/json"
	"fmt"
	"iter"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// The parts that left a thread's projection (domain/earlier.go). A
// commit writes those its events made leave in its batch; a load that
// rebuilds a thread from its events writes those the rebuild made leave
// (the same again, or, for a log from before parts were kept, for the
// first time); a decision that needs some of them reads them (commit.go,
// domain.NeedPast), as does a page of the thread (pages.go).

// maxGathers bounds how often one commit reads the past and decides
// again: each gather reads all a decision asked for so far, and no
// decision asks for more than two things at once.
const maxGathers = 3

// pastChunk is how many parts a walk back through a thread's parts reads
// at a time: each may hold a run's messages whole.
const pastChunk = 16

// encodeParts is parts as the store keeps them.
func encodeParts(parts []domain.Archived) ([]eventlog.ArchivePart, error) {
	var out []eventlog.ArchivePart
	for _, a := range parts {
		data, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("encode part %d (run %d): %w", a.Part, a.Ordinal, err)
		}
		out = append(out, eventlog.ArchivePart{Ordinal: uint32(a.Ordinal), Part: uint32(a.Part), Data: data})
	}
	return out, nil
}

// decodePart is a stored part.
func decodePart(threadID string, a eventlog.ArchivePart) (domain.Archived, error) {
	var part domain.Archived
	if err := json.Unmarshal(a.Data, &part); err != nil {
		return domain.Archived{}, fmt.Errorf("part %d (run %d) of thread %s: %w", a.Part, a.Ordinal, threadID, err)
	}
	return part, nil
}

// pastParts walks back through the parts that left t (t's: none that left
// after it), newest first, reading a few at a time.
func (h *Host) pastParts(threadID string, t *domain.Thread) iter.Seq2[domain.Archived, error] {
	return func(yield func(domain.Archived, error) bool) {
		if t.Earlier == nil {
			return
		}
		// From before the first part filed after the newest run that left.
		o, p, below := uint32(t.Earlier.Runs)+1, uint32(0), uint32(t.Earlier.Parts)
		for {
			chunk, err := h.store.ArchiveBefore(threadID, o, p, below, pastChunk)
			if err != nil {
				yield(domain.Archived{}, err)
				return
			}
			if len(chunk) == 0 {
				return
			}
			for _, a := range chunk {
				part, err := decodePart(threadID, a)
				if !yield(part, err) || err != nil {
					return
				}
			}
			o, p = chunk[len(chunk)-1].Ordinal, chunk[len(chunk)-1].Part
		}
	}
}

// parts reads the parts that left t (t's) filed under runs from..to, and
// 0 too when from is 1: what a page of those runs holds of them.
func (h *Host) parts(threadID string, t *domain.Thread, from, to int) ([]domain.Archived, error) {
	if t.Earlier == nil || from > t.Earlier.Runs {
		return nil, nil
	}
	first := uint32(from)
	if from <= 1 {
		first = 0
	}
	stored, err := h.store.Archive(threadID, first, uint32(min(to, t.Earlier.Runs)), uint32(t.Earlier.Parts))
	if err != nil {
		return nil, err
	}
	out := make([]domain.Archived, 0, len(stored))
	for _, a := range stored {
		part, err := decodePart(threadID, a)
		if err != nil {
			return nil, err
		}
		out = append(out, part)
	}
	return out, nil
}
