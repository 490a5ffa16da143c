// Package notify tells people about the events that need them, with
// webhooks: one signed JSON document POSTed per event (domain.Notices
// says which) to each target.
//
// A delivery is durable: the host writes it to the event log in the
// batch of the event it is about (eventlog.Batch.Deliveries), the
// Deliverer sends it, and it is removed only when the target answers 2xx,
// so a crash between the commit and the delivery loses none, and a
// restart sends again none that was delivered. A delivery that fails is
// tried again with exponential backoff on the host's clock (Pause) until
// GiveUpAfter has passed since its event, then kept, failed, with its
// last error, for `baton notify list` to show.
//
// Each target's count of deliveries taken, and its last, is kept beside
// them (eventlog.TargetState), written with each removal.
//
// The files: target.go the targets and the file `baton notify add` keeps
// them in; secret.go the signing secret; document.go what is sent and
// what is stored, and the backoff; send.go one POST; deliver.go the loop
// that sends.
package notify
