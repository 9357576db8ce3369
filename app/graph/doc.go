// Package graph is the Microsoft Graph client: plain net/http with small
// types for the endpoints Backstop uses, client-credentials tokens, one
// pager for @odata.nextLink/@odata.deltaLink, one error type that reads
// error.code and the inner codes (never the message text), and throttling
// done per mailbox.
//
// # Throttling
//
// Graph throttles per app per mailbox (Outlook: 4 requests in flight,
// 10,000 per 10 minutes), per app per tenant for SharePoint/OneDrive (a
// resource-unit budget), and answers over-use with 429 or 503 and a
// Retry-After. Every request therefore names the Scope whose budget it
// spends, and passes three gates before it is sent:
//
//  1. the scope's fence: after a 429/503 with Retry-After on a scope, no
//     request of that scope is sent until the time it names has passed
//     (measured from when the answer arrived, so never early). A fence
//     longer than Config.MaxRetryAfter is not waited in process: the
//     request ends with an *Error carrying RetryAfter;
//  2. the scope's concurrency: PerMailbox (4) for a Mailbox scope,
//     SharePointConcurrency for the tenant's drives, DirectoryConcurrency
//     for the directory;
//  3. the appliance-wide Limits shared by every tenant's client.
//
// A slot is held until the response body is closed, since Graph counts a
// request in flight until its answer is fully sent. The fence is checked
// again after the slots are taken, so a request that queued behind a
// throttled one does not slip out before the fence passes. Many mailboxes
// run in parallel; one busy mailbox never takes more than its share.
//
// # Why no SDK
//
// msgraph-sdk-go is ~15,000 files that add minutes to builds, and its Kiota
// retry middleware hides the throttling decisions this package must own
// (per-mailbox fences and fairness). Backstop uses about 25 endpoints;
// small hand-written structs, one pager and one error type cover them, and
// every base URL (login, graph, upload and download hosts) can point at a
// test server. See /work/shared/research/graph.md §9.
package graph
