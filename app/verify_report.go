package app

import "context"

// Verify report states. A report is "passed" only when every check ran and
// matched; "failed" is evidence against the backup (a sampled file did not
// restore to its hash, or the repository is damaged); "error" means the
// verify could not test anything (no snapshot, restic missing) and says
// nothing about the backup either way.
const (
	VerifyReportPassed = "passed"
	VerifyReportFailed = "failed"
	VerifyReportError  = "error"
)

// Problems of a sampled file in a verify report.
const (
	VerifyFileMissing    = "missing"     // restic did not restore it
	VerifyFileNotRegular = "not_regular" // restored as something other than a regular file
	VerifyFileSize       = "size"        // restored with another size
	VerifyFileContent    = "content"     // same size, another SHA-256
)

// VerifyReport is the outcome of one verify run of an endpoint: the sampled
// test restore of its newest snapshot, the re-hash of a sample of pack
// files, and restic's repository check. It is what GET /api/v1/verify/latest
// shows.
type VerifyReport struct {
	JobID       string       `json:"jobId"`
	TenantID    string       `json:"tenantId"`
	EndpointID  string       `json:"endpointId"`
	DisplayName string       `json:"displayName"`
	SnapshotID  *string      `json:"snapshotId" doc:"The snapshot tested: the endpoint's newest; null when it had none."`
	State       string       `json:"state" enum:"passed,failed,error" doc:"passed: every check matched; failed: a mismatch or damage was found; error: nothing could be tested."`
	FailureCode *string      `json:"failureCode" doc:"The cause (see /api/v1/failure-codes); null when passed."`
	StartedAt   Time         `json:"startedAt"`
	FinishedAt  Time         `json:"finishedAt"`
	Sampled     int          `json:"sampled" doc:"Files the backup sampled with their SHA-256."`
	Matched     int          `json:"matched" doc:"Sampled files restored with the same size and SHA-256."`
	Mismatched  int          `json:"mismatched" doc:"Sampled files missing from the restore or restored with other content."`
	Files       []VerifyFile `json:"files" doc:"Every sampled file and its outcome."`
	Packs       VerifyPacks  `json:"packs"`
	Check       VerifyCheck  `json:"check"`
	// RepositoryDamaged: a pack file did not hash to its name, restic's
	// check reported errors, restic could not decrypt a blob while
	// restoring, or the tested snapshot is missing from the repository.
	RepositoryDamaged bool   `json:"repositoryDamaged"`
	Details           string `json:"details" doc:"Redacted technical details of what went wrong; empty when passed."`
}

// VerifyFile is one sampled file in a verify report.
type VerifyFile struct {
	Path    string `json:"path"`
	Size    int64  `json:"size" doc:"Size recorded at backup time."`
	SHA256  string `json:"sha256" doc:"SHA-256 recorded at backup time."`
	Matched bool   `json:"matched"`
	Problem string `json:"problem" enum:",missing,not_regular,size,content" doc:"Why it did not match; empty when it matched."`
}

// VerifyPacks is the re-hash of pack files: restic names every file under
// data/ by the SHA-256 of its content, so a file whose hash differs from its
// name was altered on disk.
type VerifyPacks struct {
	Total   int      `json:"total" doc:"Pack files in the repository."`
	Checked int      `json:"checked" doc:"Pack files re-hashed in this run."`
	Bytes   int64    `json:"bytes" doc:"Bytes re-hashed."`
	Damaged []string `json:"damaged" doc:"Ids of pack files whose content does not match their name."`
}

// VerifyCheck is restic's own check: structure of index, snapshots and
// trees, plus reading (decrypting and hashing every blob of) one rotating
// subset of the pack files.
type VerifyCheck struct {
	Ran    bool   `json:"ran"`
	Subset string `json:"subset" doc:"The --read-data-subset read, n/t: t runs read the whole repository."`
	Passed bool   `json:"passed"`
}

// VerifyResult is data.result of the verify.completed webhook (CONTRACT §5).
type VerifyResult struct {
	State      string `json:"state"`
	Sampled    int    `json:"sampled"`
	Matched    int    `json:"matched"`
	Mismatched int    `json:"mismatched"`
}

// Result summarises the report for the verify.completed webhook.
func (r *VerifyReport) Result() VerifyResult {
	return VerifyResult{State: r.State, Sampled: r.Sampled, Matched: r.Matched, Mismatched: r.Mismatched}
}

// ApplyTo sets the endpoint facts its readiness is computed from (see
// Endpoint.View): a passed report records the tested snapshot as proven
// and clears earlier damage; a failed one marks the restore test failed and
// the repository damaged when it is; an error report changes nothing,
// because it tested nothing.
func (r *VerifyReport) ApplyTo(e *Endpoint) {
	at := r.FinishedAt.Time
	switch r.State {
	case VerifyReportPassed:
		e.VerifyState, e.VerifyCheckedAt, e.RepositoryDamaged = VerifyPassed, &at, false
		if r.SnapshotID != nil {
			e.VerifyPassedSnapshotID = *r.SnapshotID
		}
	case VerifyReportFailed:
		e.VerifyState, e.VerifyCheckedAt, e.RepositoryDamaged = VerifyFailed, &at, r.RepositoryDamaged
	}
}

// VerifyReportFilter selects reports; empty fields select all.
type VerifyReportFilter struct {
	TenantID   string
	EndpointID string
}

// VerifyReportService stores verify reports.
type VerifyReportService interface {
	// RecordVerifyReport stores r and applies it to its endpoint's facts
	// (VerifyReport.ApplyTo) in one transaction.
	RecordVerifyReport(ctx context.Context, r *VerifyReport) error
	// LatestVerifyReport returns the report that finished last among those
	// the filter selects, or a not-found error when there is none.
	LatestVerifyReport(ctx context.Context, f VerifyReportFilter) (*VerifyReport, error)
}
