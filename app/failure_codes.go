package app

import (
	"fmt"
	"strconv"
)

// FailureCode is one entry of the failure catalogue: everything a PSA needs
// to map a cause to a ticket, independent of any one occurrence.
type FailureCode struct {
	Code      string         `json:"code"`
	Category  string         `json:"category" enum:"auth,permission,throttling,network,source,storage,integrity,agent,configuration,internal"`
	Title     string         `json:"title" doc:"One line for a ticket subject."`
	Transient bool           `json:"transient" doc:"True when waiting alone may help; such failures are retried automatically."`
	Retryable bool           `json:"retryable" doc:"True when a manual retry makes sense (after the fix steps)."`
	Params    []FailureParam `json:"params" doc:"Parameters an occurrence may carry in failure.params."`
	FixSteps  []string       `json:"fixSteps" doc:"Ordered steps; {name} is replaced by the parameter in a job's failure."`
	DocsURL   string         `json:"docsUrl" doc:"The explanation on this appliance's web interface, relative to its public address."`
}

// FailureParam documents one parameter of a failure code.
type FailureParam struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// CodeUnknown is the cause of a failure nothing more specific explains.
const CodeUnknown = "unknown"

// CodeInterruptedRepeatedly ends a job whose runs keep being cut off by the
// process stopping: it is re-queued after each interruption, but not for ever.
const CodeInterruptedRepeatedly = "job.interrupted_repeatedly"

// FailureDocsBase is where failure codes are explained: the failure-codes
// page of the appliance's own web interface, with the code as the anchor. It
// is a reference relative to the appliance's public address, because an
// appliance is often unreachable from outside and no address but its own is
// certain to exist. The catalogue itself is served at GET /api/v1/failure-codes.
const FailureDocsBase = "/ui/failure-codes#"

func param(name, desc string) FailureParam { return FailureParam{Name: name, Description: desc} }

// failureCatalogue is the one list of stable cause codes. Codes are never
// renamed or removed once released: integrators map them to ticket types.
var failureCatalogue = []FailureCode{
	{Code: "graph.consent_missing", Category: CategoryPermission, Title: "Microsoft 365 admin consent missing",
		Retryable: true,
		Params:    []FailureParam{param("permission", "The Microsoft Graph application permission missing."), param("azureTenantId", "The Microsoft 365 tenant.")},
		FixSteps: []string{
			"Sign in to the Microsoft Entra admin center as a Global Administrator of tenant {azureTenantId}.",
			"Open Enterprise applications, select the Backstop application and open Permissions.",
			"Grant admin consent for {permission} (and every other permission listed as not granted).",
			"Start the backup again; no change in Backstop is needed.",
		}},
	{Code: "graph.auth_failed", Category: CategoryAuth, Title: "Microsoft 365 sign-in failed",
		Retryable: true,
		Params:    []FailureParam{param("azureTenantId", "The Microsoft 365 tenant."), param("clientId", "The application (client) id.")},
		FixSteps: []string{
			"Check in the Entra admin center that the application {clientId} exists in tenant {azureTenantId}.",
			"Create a new client secret if the current one expired, and update the source in Backstop.",
			"Start the backup again.",
		}},
	{Code: "graph.throttled", Category: CategoryThrottling, Title: "Microsoft 365 is throttling requests",
		Transient: true, Retryable: true,
		Params: []FailureParam{param("retryAfterSeconds", "Seconds Microsoft asked to wait."), param("mailbox", "The mailbox or drive being read.")},
		FixSteps: []string{
			"Nothing to do at first: Backstop retries automatically after {retryAfterSeconds} seconds.",
			"If it recurs every night, spread the backup schedules of this tenant over more hours.",
			"Check that no other tool reads the same mailboxes with the same application at the same time.",
		}},
	{Code: "graph.mailbox_unavailable", Category: CategorySource, Title: "Mailbox or drive not available",
		Retryable: true,
		Params:    []FailureParam{param("mailbox", "The mailbox or drive address.")},
		FixSteps: []string{
			"Check in the Microsoft 365 admin center that {mailbox} exists, is licensed and is not being provisioned.",
			"If the user left, turn protection off for {mailbox} in the directory, or keep it to retain the last backup.",
			"Start the backup again once the mailbox is available.",
		}},
	{Code: "imap.auth_failed", Category: CategoryAuth, Title: "IMAP sign-in refused",
		Retryable: true,
		Params:    []FailureParam{param("host", "The IMAP server."), param("username", "The account name used.")},
		FixSteps: []string{
			"Check the user name {username} and password of the IMAP source; update the password in Backstop if it changed.",
			"If the provider requires app passwords or OAuth for IMAP, create an app password for {username}.",
			"Check that IMAP access is enabled for the account on {host}.",
			"Start the backup again.",
		}},
	{Code: "imap.tls_failed", Category: CategoryConfiguration, Title: "IMAP TLS handshake failed",
		Retryable: true,
		Params:    []FailureParam{param("host", "The IMAP server."), param("port", "The port."), param("reason", "Why the handshake failed (certificate, protocol).")},
		FixSteps: []string{
			"Check that {host} port {port} speaks the security mode set in the source (tls on 993, starttls on 143).",
			"Check the server certificate: it must be valid for {host} and not expired ({reason}).",
			"Start the backup again.",
		}},
	{Code: "imap.connection_failed", Category: CategoryNetwork, Title: "IMAP server not reachable",
		Transient: true, Retryable: true,
		Params: []FailureParam{param("host", "The IMAP server."), param("port", "The port.")},
		FixSteps: []string{
			"Nothing to do at first: Backstop retries automatically.",
			"If it persists, check that {host} resolves and that port {port} is reachable from the appliance (firewall, outbound rules).",
		}},
	{Code: "imap.quota_exceeded", Category: CategorySource, Title: "IMAP mailbox over quota during a restore",
		Retryable: true,
		Params:    []FailureParam{param("host", "The IMAP server."), param("username", "The account restored into.")},
		FixSteps: []string{
			"Free space in the mailbox {username} on {host} (delete or archive mail, empty the trash), or ask the provider to raise its quota.",
			"Alternatively restore fewer folders or messages, or into another account with room.",
			"Start the restore again: messages already restored are recognised and not appended twice.",
		}},
	{Code: "imap.message_unavailable", Category: CategorySource, Title: "The IMAP server could not return a message",
		Retryable: true,
		Params:    []FailureParam{param("folder", "The folder."), param("uid", "The message's UID in the folder.")},
		FixSteps: []string{
			"Nothing to do at first: the rest of the account was backed up, and the next backup tries this message again.",
			"If it fails every night, open the message (folder {folder}, UID {uid}) in a mail client: the server's copy may be damaged; the server's log names the cause.",
		}},
	{Code: "storage.full", Category: CategoryStorage, Title: "Backup storage is full",
		Retryable: true,
		Params:    []FailureParam{param("target", "The storage target."), param("freeBytes", "Free bytes when the write failed.")},
		FixSteps: []string{
			"Free space on storage target {target} or enlarge it.",
			"Review retention: shorter retention frees space at the next prune.",
			"Start the backup again.",
		}},
	{Code: "storage.unreachable", Category: CategoryStorage, Title: "Backup storage not reachable",
		Transient: true, Retryable: true,
		Params: []FailureParam{param("target", "The storage target.")},
		FixSteps: []string{
			"Nothing to do at first: Backstop retries automatically.",
			"If it persists, check that storage target {target} is mounted or its S3 endpoint answers, and that its credentials are valid.",
		}},
	{Code: "verify.hash_mismatch", Category: CategoryIntegrity, Title: "Test restore did not match the backup",
		Params: []FailureParam{param("snapshotId", "The snapshot tested."), param("path", "A file whose restored content differed."), param("mismatched", "Number of sampled files that differed.")},
		FixSteps: []string{
			"Do not delete older snapshots: they may be the last good copies.",
			"Run a new backup of the machine and a verify run of the new snapshot.",
			"Check the storage for disk errors; open a support case with this job's id if the mismatch repeats.",
		}},
	{Code: "repository.damaged", Category: CategoryIntegrity, Title: "Backup repository is damaged",
		Params: []FailureParam{param("repository", "The repository (endpoint or object).")},
		FixSteps: []string{
			"Do not prune or delete anything in repository {repository}.",
			"Check the storage for disk errors.",
			"Open a support case with this job's id; a repair run rebuilds the index from the intact pack files.",
		}},
	{Code: "agent.backup_failed", Category: CategoryAgent, Title: "The agent's backup run failed",
		Retryable: true,
		Params:    []FailureParam{param("exitCode", "Exit code of the backup tool."), param("hostname", "The machine.")},
		FixSteps: []string{
			"Read the details of this failure and the agent log on {hostname}.",
			"Check that the backed-up paths exist and are readable by the agent's user.",
			"Start a backup of the machine again.",
		}},
	{Code: "agent.tool_missing", Category: CategoryAgent, Title: "The backup tool is missing on the machine",
		Retryable: true,
		Params:    []FailureParam{param("tool", "The missing program."), param("hostname", "The machine.")},
		FixSteps: []string{
			"Reinstall the agent on {hostname} with the install command: it installs {tool} too.",
			"Start a backup of the machine again.",
		}},
	{Code: CodeInterruptedRepeatedly, Category: CategoryInternal, Title: "The appliance stopped every time this job ran",
		Retryable: true,
		Params:    []FailureParam{param("interruptions", "How many runs in a row were cut off by the appliance stopping.")},
		FixSteps: []string{
			"Look at the appliance's log around the times this job ran: the process stopped while it ran (a crash, an out-of-memory kill, or repeated restarts).",
			"Fix that cause (for example give the VM more memory), then start the job again.",
			"If the process crashed, open a support case with this job's id and the log lines.",
		}},
	{Code: CodeUnknown, Category: CategoryInternal, Title: "Unexpected failure",
		Retryable: true,
		Params:    []FailureParam{param("originalCode", "A code the reporter used that this version does not know.")},
		FixSteps: []string{
			"Start the job again.",
			"If it fails again, open a support case with this job's id and the failure details.",
		}},
}

var failureByCode = func() map[string]FailureCode {
	m := make(map[string]FailureCode, len(failureCatalogue))
	for i := range failureCatalogue {
		c := &failureCatalogue[i]
		c.DocsURL = FailureDocsBase + c.Code
		m[c.Code] = *c
	}
	return m
}()

// FailureCodes returns the catalogue in a stable order (a copy).
func FailureCodes() []FailureCode {
	out := make([]FailureCode, len(failureCatalogue))
	copy(out, failureCatalogue)
	return out
}

// LookupFailureCode returns the catalogue entry for code.
func LookupFailureCode(code string) (FailureCode, bool) {
	c, ok := failureByCode[code]
	return c, ok
}

func toText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}
