package e2e

import (
	"testing"
	"time"

	"backstop/app/update/githubtest"
)

// TestUpdatePanel: with the update check on and a newer release found, the
// settings page offers "Update to v1.0.0"; announcing it shows the phase,
// and a release without the binary ends failed with the updater's error on
// the page, which Dismiss clears.
func TestUpdatePanel(t *testing.T) {
	const repo = "backstop-dev/backstop"
	at := time.Now().Add(-time.Hour)
	gh := githubtest.New(repo, nil, githubtest.Release{Tag: "v1.0.0", CreatedAt: at, PublishedAt: at})
	defer gh.Close()
	a := startAppliance(t, "SERVICE_UPDATE_CHECK=true", "SERVICE_UPDATE_API_URL="+gh.URL, "SERVICE_UPDATE_REPOSITORY="+repo)
	a.createAdmin(t, adminEmail, adminPassword)
	b := newBrowser(t, a.URL, 1280, 900)
	b.setSession(a.signIn(t, adminEmail, adminPassword))
	b.open("/ui/settings")
	b.waitText("Update to v1.0.0")
	b.click("Update to v1.0.0")
	b.waitTrue("a phase shown", `!!document.querySelector('[data-phase]')`)
	b.waitText("has no asset")
	b.waitTrue("phase failed", `document.querySelector('[data-phase]').dataset.phase === 'failed'`)
	b.shot("40-update-failed")
	b.click("Dismiss")
	b.waitTrue("the record cleared", `!document.querySelector('[data-phase]')`)
	b.waitText("Update to v1.0.0")
}
