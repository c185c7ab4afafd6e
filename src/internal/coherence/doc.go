// Package coherence keeps what the replicas of a workload serve coherent
// with the purges any of them takes: once a purge returns, no replica
// serves what it took back, not even one the purge could not reach.
//
// A replica takes each purge to the others itself (package admin pushes
// it to every replica, ready or not). Two things here cover a replica the
// push missed, in the shape of leases (Gray and Cheriton, 1989):
//
//   - A Journal numbers the purges this replica takes to the others and
//     keeps the latest, so that a replica that missed one fetches it: every
//     replica asks every other, every SyncInterval, for the entries after
//     the last it applied (Sync). A reply grants the asker a lease of
//     Lease, counted from when it asked.
//   - Leases holds this replica's leases from the others. It may serve what
//     it keeps (answers, replayed records) only while every replica it has
//     synced with has granted it a lease that has not run out (Hold tells
//     until when). Past that, until every lease is renewed, its calls are
//     calls of their own: nothing is shared or kept; and before a lease is
//     renewed, everything it kept is taken back.
//
// So a purge waits, for each replica it did not reach, until that replica
// has applied it (fetched through Sync) or its lease from this replica has
// run out, or it has left the membership (Journal.Await). Either way, no
// replica serves what the purge took back once Await returns: it applied
// the purge, or it took everything back, or it is gone. The replicas it
// waited out are named.
//
// A replica that does not find itself among the replicas listed (an
// unready pod, where the list names ready pods only) may be neither reached
// nor waited for: until it is listed, it serves nothing it keeps.
//
// A replica that is gone (nothing listens at its address any more, or its
// address has left the membership) is not waited for, and no lease from it
// is needed: a replica that no longer runs serves nothing. A replica this
// one has never synced with grants no lease either way: until the first
// Sync, neither is bound (a replica new to the membership is synced with
// within SyncInterval of being listed; a purge waits Lease for that first
// Sync before it names the replica missed).
package coherence
