package main

import (
	"context"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// Following a thread's events: one subscription after another from the
// last sequence delivered, until the command's context ends.

// follow streams a thread's events after a sequence, until ctx ends: a
// goroutine reads them so that the caller also hears Ctrl-C and the user's
// answers. A subscriber the service cut off for falling behind subscribes
// again after the last event it got. errs gets the stream's error, if it
// ends with one.
func follow(ctx context.Context, c *client, threadID string, after uint64) (<-chan *batonv1.Event, <-chan error) {
	recs := make(chan *batonv1.Event)
	errs := make(chan error, 1)
	go func() {
		defer close(recs)
		for {
			err := followOnce(ctx, c, threadID, &after, recs)
			if status.Code(err) == codes.ResourceExhausted && ctx.Err() == nil {
				continue
			}
			if err != nil {
				errs <- err
			}
			return
		}
	}()
	return recs, errs
}

// followOnce is one subscription; after is the last sequence delivered.
func followOnce(ctx context.Context, c *client, threadID string, after *uint64, recs chan<- *batonv1.Event) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: threadID, AfterSequence: *after})
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := knownPayload(ev); err != nil {
			return err
		}
		select {
		case recs <- ev:
			*after = ev.GetSequence()
		case <-ctx.Done():
			return nil
		}
	}
}
