// Package m365 is the Microsoft 365 engine: the directory of a tenant,
// mailbox backups (per-folder message delta, exact MIME from $value),
// OneDrive backups (root delta, content checked against quickXorHash), and
// restores through Graph. It knows nothing of jobs, HTTP routes or the
// database: the protected-object layer (app/protect) calls it with a
// *graph.Client per source.
//
// # Manifest of a mailbox snapshot
//
// For each mail folder (sorted by path): a folder item, then its messages
// sorted by received time. A folder item has Kind "folder", Path its own
// path, Name its display name and Meta a FolderMeta holding the folder's
// Graph id and the deltaLink the next backup starts from. A message item
// has Kind "message", Path its folder's path, Name its subject, the exact
// MIME ($value) as Content and a MessageMeta as Meta (subject, from
// "Name <address>", date = sentDateTime in RFC 3339, as the browser reads
// them).
//
// Folder paths are display names joined with '/'. A '/' or '%' inside a
// display name is written %2F or %25 (EscapeName, UnescapeName), so a path
// always splits back into the names Graph shows.
//
// Item ids are stable and hold no '/': "m" + the first 32 hex digits of
// SHA-256("message\x00" + Graph message id) for messages, "f" + the same of
// ("folder\x00" + Graph folder id) for mail folders, "d" + the same of
// ("drive\x00" + drive item id) for drive files and folders. A message
// keeps its id across snapshots as long as Graph keeps its id.
//
// # Mail delta
//
// Each folder keeps its own deltaLink. An incremental applies the delta to
// the previous snapshot's messages of that folder: @removed entries remove,
// other entries add or update metadata (the last entry of an id wins, so
// replayed entries are harmless). The MIME is fetched only for messages
// whose Graph id was not stored before, or whose changeKey changed (a
// content change of a draft, or a property change: the store's
// deduplication makes the re-read cost a GET, not space). Content known
// under the same Graph id anywhere in the previous snapshot is reused, so a
// message moved with an unchanged id is not fetched again.
//
// An invalid delta token (syncStateNotFound, resyncRequired,
// SyncStateInvalid or 410) restarts that folder alone from the start;
// content already stored is reused. A mailbox over its quota refuses delta
// with ErrorQuotaExceeded: that folder is then listed in full and its
// FolderMeta.DeltaLink is "", so the next backup tries delta again. A
// folder gone from the tree takes its messages with it.
//
// # Drive delta
//
// The drive root's folder item (Path "", Name "") carries FileMeta with the
// drive id and the deltaLink. Delta entries carry no parent path, so the
// engine keeps id → (parent id, name, folder or file) from the previous
// manifest plus the changes, and computes paths from it; an item whose
// parent chain does not reach the root (a deleted folder's children) is
// gone. A 410 or resyncRequired re-enumerates the whole drive, reusing the
// content of files whose cTag or quickXorHash is unchanged. Every download
// is hashed with quickXorHash while it is stored; a file whose hash differs
// from what Graph reports fails with graph.hash_mismatch and keeps its
// previous version in the snapshot (or is left out when it had none).
// OneNote notebooks (the package facet) and what is below them are skipped:
// their content is not a file Graph can download.
package m365

import "net/url"

// Permissions are the application permissions Backstop needs (CONTRACT §13).
var Permissions = []string{"User.Read.All", "Organization.Read.All", "MailboxSettings.Read", "Mail.ReadWrite", "Files.ReadWrite.All"}

// ConsentURL is the admin-consent link for the customer's tenant.
func ConsentURL(loginURL, azureTenantID, clientID string) string {
	if loginURL == "" {
		loginURL = "https://login.microsoftonline.com"
	}
	for len(loginURL) > 0 && loginURL[len(loginURL)-1] == '/' {
		loginURL = loginURL[:len(loginURL)-1]
	}
	return loginURL + "/" + url.PathEscape(azureTenantID) + "/adminconsent?client_id=" + url.QueryEscape(clientID)
}
