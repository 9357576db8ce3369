package app

// Cause codes of verify runs that are not evidence about the backup itself:
// there was nothing to test, or the appliance could not run the test. They
// leave readiness as it was (VerifyReport.ApplyTo). The codes that are
// evidence, verify.hash_mismatch and repository.damaged, are in the main
// catalogue. Like every code, never renamed.
var verifyFailureCodes = []FailureCode{
	{Code: "verify.no_snapshot", Category: CategoryConfiguration, Title: "Nothing to verify: the machine has no backup yet",
		Retryable: true,
		Params:    []FailureParam{param("endpointId", "The machine.")},
		FixSteps: []string{
			"Check that the agent on the machine is online and has backup paths configured.",
			"Run a backup of the machine (POST /api/v1/backups), then start the verify again.",
		}},
	{Code: "verify.no_samples", Category: CategorySource, Title: "Nothing to verify: the newest backup sampled no files",
		Retryable: true,
		Params:    []FailureParam{param("snapshotId", "The snapshot."), param("endpointId", "The machine.")},
		FixSteps: []string{
			"Check that the backup paths of the machine contain regular files (the agent samples files of up to 256 MiB).",
			"Run a new backup of the machine, then start the verify again.",
		}},
	{Code: "verify.tool_failed", Category: CategoryInternal, Title: "The appliance could not run the restore test",
		Retryable: true,
		Params:    []FailureParam{param("tool", "The program (restic)."), param("step", "What it was doing.")},
		FixSteps: []string{
			"Check that tools.restic in the appliance configuration names a working restic binary (restic version).",
			"Check free space in the appliance's data directory: test restores are written to data_dir/tmp.",
			"Start the verify again; open a support case with this job's id if it fails again.",
		}},
}

func init() {
	for _, c := range verifyFailureCodes {
		c.DocsURL = FailureDocsBase + c.Code
		failureCatalogue = append(failureCatalogue, c)
		failureByCode[c.Code] = c
	}
}
