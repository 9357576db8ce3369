package app

// Cause codes of the Microsoft 365 engine beyond the graph.* codes of the
// main catalogue, and the parameters added to those. Like every code,
// never renamed.
var graphFailureCodes = []FailureCode{
	{Code: "graph.quota_exceeded", Category: CategoryStorage, Title: "Microsoft 365 mailbox or OneDrive is full",
		Retryable: true,
		Params:    []FailureParam{param("mailbox", "The mailbox or drive restored into.")},
		FixSteps: []string{
			"Free space in {mailbox} (empty Deleted Items, the recycle bin, or old mail) or raise its quota in the Microsoft 365 admin center.",
			"Or restore into another user's mailbox or drive.",
			"Start the restore again: what is already there is skipped, nothing is duplicated.",
		}},
	{Code: "graph.hash_mismatch", Category: CategoryIntegrity, Title: "OneDrive download did not match its quickXorHash",
		Retryable: true,
		Params: []FailureParam{param("mailbox", "The user whose drive was read."), param("path", "The file."),
			param("expected", "The quickXorHash Graph reports."), param("actual", "The hash of the bytes downloaded.")},
		FixSteps: []string{
			"Nothing to do at first: the previous version of {path} stays in the snapshot and the next backup downloads it again.",
			"If it repeats for {path}, open the file in OneDrive to check it is readable, and open a support case with this job's id.",
		}},
}

func init() {
	for _, c := range graphFailureCodes {
		c.DocsURL = FailureDocsBase + c.Code
		failureCatalogue = append(failureCatalogue, c)
		failureByCode[c.Code] = c
	}
	// graph.consent_missing names the admin-consent link too.
	for i, c := range failureCatalogue {
		if c.Code == "graph.consent_missing" {
			c.Params = append(c.Params[:len(c.Params):len(c.Params)],
				param("consentUrl", "The admin-consent link for the tenant; open it as a Global Administrator."))
			failureCatalogue[i] = c
			failureByCode[c.Code] = c
		}
	}
}
