package app

// Cause codes the agent reports for its restic runs. They join the one
// catalogue at package initialisation (after failureCatalogue and
// failureByCode are built), so GET /api/v1/failure-codes lists them like
// every other code. The agent program sends these strings; they are part of
// the agent protocol and, like every code, never renamed.
var agentFailureCodes = []FailureCode{
	{Code: "agent.restore_failed", Category: CategoryAgent, Title: "The agent's restore run failed",
		Retryable: true,
		Params:    []FailureParam{param("exitCode", "Exit code of the backup tool."), param("hostname", "The machine.")},
		FixSteps: []string{
			"Read the details of this failure and the agent log on {hostname}.",
			"Check that the restore target exists, is writable by the agent's user and has free space.",
			"Start the restore again.",
		}},
	{Code: "agent.no_paths", Category: CategoryConfiguration, Title: "No backup paths are configured for the machine",
		Retryable: true,
		Params:    []FailureParam{param("hostname", "The machine.")},
		FixSteps: []string{
			"Set the paths to back up for {hostname} (web interface, or PATCH /api/v1/endpoints/{id}).",
			"Start a backup of the machine again.",
		}},
	{Code: "restic.wrong_password", Category: CategoryConfiguration, Title: "The repository password is wrong",
		Params: []FailureParam{param("exitCode", "Exit code of restic (12 from restic 0.17 on, 1 before)."), param("hostname", "The machine.")},
		FixSteps: []string{
			"Compare repository.password in agent.json on {hostname} with the password the appliance keeps for this endpoint.",
			"If agent.json was replaced or edited, restore it from the appliance's copy; never re-initialise the repository.",
		}},
	{Code: "restic.repository_missing", Category: CategoryStorage, Title: "The machine's backup repository does not exist",
		Retryable: true,
		Params:    []FailureParam{param("exitCode", "Exit code of restic (10 from restic 0.17 on, 1 before)."), param("hostname", "The machine.")},
		FixSteps: []string{
			"Check that the appliance's data directory still holds agent/restic/<endpoint id>/.",
			"If the repository was lost, the next backup of {hostname} creates a new one; older snapshots are gone.",
		}},
	{Code: "restic.lock_failed", Category: CategoryStorage, Title: "The backup repository is locked",
		Transient: true, Retryable: true,
		Params: []FailureParam{param("exitCode", "Exit code of restic (11 from restic 0.17 on, 1 before)."), param("hostname", "The machine.")},
		FixSteps: []string{
			"Nothing to do at first: the lock of an ended run expires and the next run proceeds.",
			"If it persists, check that no second agent or restic process on {hostname} uses the repository.",
		}},
	{Code: "restic.source_missing", Category: CategorySource, Title: "None of the backup paths exist on the machine",
		Retryable: true,
		Params:    []FailureParam{param("exitCode", "Exit code of restic."), param("hostname", "The machine.")},
		FixSteps: []string{
			"Check the configured paths of {hostname}: none of them exists there.",
			"Correct the paths and start a backup again.",
		}},
	{Code: "restic.repository_unreachable", Category: CategoryNetwork, Title: "The machine cannot reach the appliance's repository",
		Transient: true, Retryable: true,
		Params: []FailureParam{param("exitCode", "Exit code of restic."), param("hostname", "The machine.")},
		FixSteps: []string{
			"Nothing to do at first: the next scheduled run tries again.",
			"If it persists, check that {hostname} reaches the appliance's public address (DNS, firewall, proxy).",
		}},
	{Code: "restic.repository_refused", Category: CategoryAuth, Title: "The appliance refused the machine's repository credentials",
		Params: []FailureParam{param("exitCode", "Exit code of restic."), param("hostname", "The machine.")},
		FixSteps: []string{
			"Check whether the endpoint was revoked; a revoked endpoint cannot back up.",
			"Otherwise compare endpointId and secret in agent.json on {hostname} with a fresh enrollment.",
		}},
}

func init() {
	for _, c := range agentFailureCodes {
		c.DocsURL = FailureDocsBase + c.Code
		failureCatalogue = append(failureCatalogue, c)
		failureByCode[c.Code] = c
	}
}
