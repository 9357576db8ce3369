package chain

import "errors"

// RenderPDF renders the report deterministically (same JSON, same bytes):
// the period, counts, checkpoint root hash and size, verifier key and
// verification state as text (monospace for hashes), the holds, the
// records table, and the JSON itself embedded as an attachment
// "evidence.json".
func RenderPDF(reportJSON []byte) ([]byte, error) { return nil, errors.New("pdf: not yet") }
