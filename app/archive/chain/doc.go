// Package chain is the archive's verifiable log, free of the database: the
// record format of CONTRACT §14, RFC 6962 hashing through
// golang.org/x/mod/sumdb/tlog, checkpoints as C2SP signed notes
// (golang.org/x/mod/sumdb/note, Ed25519), consistency proofs, RFC 3161
// time-stamps of checkpoints, the evidence report (JSON and a
// deterministic PDF rendered from it) and its offline verification.
//
// # Records
//
// A record is "backstop-archive/v1\n" then "key value\n" lines: type,
// tenant, then per type message (message, sha256, size, channel, at),
// tombstone (message, sha256, at, reason), hold and release (at, reason).
// ParseRecord accepts only what Marshal writes; its leaf hash is
// tlog.RecordHash of the text.
//
// # Checkpoints
//
// A checkpoint is a C2SP tlog-checkpoint: the note body
// "<origin>\n<size>\n<base64 root>\n" (no extension lines), signed with
// the appliance's Ed25519 note key. Its time-stamp, when there is one, is
// an RFC 3161 response over SHA-256 of that body.
//
// # The evidence report's range proof
//
// A report holds the period's records as one contiguous range of leaves
// [firstIndex, lastIndex] of the tree of size N its checkpoint signs, each
// with its full text, and one rangeProof: the hashes of the maximal
// complete subtrees of the tree outside the range, in this order:
//
//  1. left of the range, the subtrees covering leaves [0, firstIndex):
//     from leaf 0, each time the largest subtree of 2^k leaves that
//     starts at a multiple of 2^k and ends at or before firstIndex (the
//     binary digits of firstIndex, largest first);
//  2. right of the range, the subtrees covering [lastIndex+1, N): from
//     leaf lastIndex+1, each time the largest subtree of 2^k leaves that
//     starts at a multiple of 2^k and ends at or before N.
//
// Each is the RFC 6962 hash of its leaves (tlog's stored hash at level k).
// A verifier that knows firstIndex, lastIndex and N knows the subtrees'
// sizes, so the proof is bare hashes (at most about 2·log2 N). To
// recompute the root, take the left hashes, the range's leaf hashes
// (tlog.RecordHash of each record text) and the right hashes as one
// left-to-right sequence of complete subtrees and merge them like binary
// addition: push each; while the top two have the same height, replace
// them by NodeHash(left, right). The stack ends as the subtrees of N's
// binary digits; folding it from the right (h = NodeHash(s[i], h)) gives
// the RFC 6962 root, which must equal the checkpoint's. This takes
// O(records) hashes and O(log N) memory, so a report of a million records
// verifies in well under the time it takes to read it, and any changed,
// added, removed or reordered record changes the root.
//
// The consistencyProof is tlog.ProveTree from previousCheckpoint's size
// to the checkpoint's (RFC 6962 consistency proof), empty when there is
// no previous checkpoint or it has the same size.
//
// What a report does not prove: that the records just outside the range
// fall outside the period. An auditor who needs completeness at the
// period's edges asks for a report of a wider period.
package chain
