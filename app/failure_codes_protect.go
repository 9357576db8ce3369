package app

// Cause codes of protected-object jobs beyond the IMAP, storage and
// integrity codes of the main catalogue. Like every code, never renamed.
var protectFailureCodes = []FailureCode{
	{Code: "verify.object_no_snapshot", Category: CategoryConfiguration, Title: "Nothing to verify: the protected object has no backup yet",
		Retryable: true,
		Params:    []FailureParam{param("protectedObjectId", "The protected object.")},
		FixSteps: []string{
			"Check that the object's source can sign in (its state in the sources list).",
			"Run a backup of the object (POST /api/v1/backups with targetType protected_object), then start the verify again.",
		}},
	{Code: "source.unavailable", Category: CategoryConfiguration, Title: "The protected object's source is deleted or disabled",
		Params: []FailureParam{param("protectedObjectId", "The protected object."), param("sourceId", "Its source, if it still exists.")},
		FixSteps: []string{
			"A deleted source cannot be backed up: its snapshots stay until retention removes them. Add the account again to back it up.",
			"A disabled source is enabled again with PATCH /api/v1/sources/{sourceId} { \"disabled\": false }.",
		}},
}

func init() {
	for _, c := range protectFailureCodes {
		c.DocsURL = FailureDocsBase + c.Code
		failureCatalogue = append(failureCatalogue, c)
		failureByCode[c.Code] = c
	}
}
