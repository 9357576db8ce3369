package app

// Failure codes of archive_verify jobs (CONTRACT §14). Like every code,
// never renamed.
const (
	CodeArchiveChainBroken     = "archive.chain_broken"
	CodeArchiveMessageMismatch = "archive.message_mismatch"
)

var archiveFailureCodes = []FailureCode{
	{Code: CodeArchiveChainBroken, Category: CategoryIntegrity, Title: "The archive's log of a tenant does not verify",
		Params: []FailureParam{param("tenantId", "The tenant."), param("index", "The first record or checkpoint size found wrong."),
			param("reason", "What did not match.")},
		FixSteps: []string{
			"Treat this as a possible tampering or a damaged catalogue: do not purge or change archive settings of the tenant until it is understood.",
			"Keep the signed checkpoints you exported before (evidence reports): they prove which records existed and can be compared with the appliance's.",
			"Check the appliance's disk and file system for errors, and restore the catalogue from the replica or backup if it was damaged.",
			"Start the verification again (POST /api/v1/archive/chain/verify); open a support case with this job's id if it still fails.",
		}},
	{Code: CodeArchiveMessageMismatch, Category: CategoryIntegrity, Title: "An archived message's bytes no longer match its record",
		Params: []FailureParam{param("tenantId", "The tenant."), param("messageId", "The first message found wrong."),
			param("count", "How many messages did not match or were missing.")},
		FixSteps: []string{
			"Check the storage target of tenant {tenantId} (GET /api/v1/storage) and the appliance's data directory disk for errors.",
			"If the storage was restored from an older copy, messages captured since are missing: restore them from a later copy if there is one.",
			"Start the verification again (POST /api/v1/archive/chain/verify); open a support case with this job's id if it still fails.",
		}},
}

func init() {
	for _, c := range archiveFailureCodes {
		c.DocsURL = FailureDocsBase + c.Code
		failureCatalogue = append(failureCatalogue, c)
		failureByCode[c.Code] = c
	}
}
