package app

// Cause codes of retention jobs (app/retention): each names why one
// repository or protected object could not be thinned out; the job goes on
// with the others and ends partial. A repository whose password or
// directory is missing fails with the agent catalogue's
// restic.wrong_password or restic.repository_missing, a full disk with
// storage.full. Like every code, never renamed.
var retentionFailureCodes = []FailureCode{
	{Code: "retention.repository_locked", Category: CategoryStorage, Title: "Retention skipped a machine: its repository is in use",
		Transient: true, Retryable: true,
		Params: []FailureParam{param("endpointId", "The machine."), param("hostname", "The machine's host name."),
			param("holder", "What held the repository: \"restic lock\" (an agent backup running). A verify run is waited for, never a holder.")},
		FixSteps: []string{
			"Nothing to do at first: a backup of {hostname} was running; the next nightly retention run thins the repository out.",
			"If it recurs every night, move the backup schedule of {hostname} away from the retention run (02:30 UTC).",
			"If no backup runs and it persists, a crashed run left a lock: it expires after 30 minutes, then start retention again (POST /api/v1/retention/run).",
		}},
	{Code: "retention.tool_failed", Category: CategoryInternal, Title: "Retention could not thin out a repository",
		Retryable: true,
		Params:    []FailureParam{param("endpointId", "The machine."), param("tool", "The program (restic)."), param("step", "What it was doing.")},
		FixSteps: []string{
			"Check that tools.restic in the appliance configuration names a working restic binary (restic version).",
			"Check free space in the appliance's data directory: pruning writes new pack files before it deletes old ones.",
			"Start retention again (POST /api/v1/retention/run); open a support case with this job's id if it fails again.",
		}},
	{Code: "retention.snapshots_failed", Category: CategoryStorage, Title: "Retention could not forget old snapshots of a protected object",
		Retryable: true,
		Params:    []FailureParam{param("protectedObjectId", "The protected object, or empty for the tenant's garbage collection.")},
		FixSteps: []string{
			"Check the state of the tenant's storage target (GET /api/v1/storage).",
			"Start retention again (POST /api/v1/retention/run) once the target is ok.",
		}},
	{Code: "retention.archive_failed", Category: CategoryStorage, Title: "Retention could not purge expired archive messages",
		Retryable: true,
		Params:    []FailureParam{param("tenantId", "The tenant.")},
		FixSteps: []string{
			"Check the appliance's log for the archive retention error and the state of the data directory.",
			"Start retention again (POST /api/v1/retention/run); messages are purged only after their tombstone is recorded, so a retry is safe.",
		}},
}

func init() {
	for _, c := range retentionFailureCodes {
		c.DocsURL = FailureDocsBase + c.Code
		failureCatalogue = append(failureCatalogue, c)
		failureByCode[c.Code] = c
	}
}
