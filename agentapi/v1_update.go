package agentapi

import (
	"net/http"

	"backstop/agentapi/wire"
	"backstop/app"
)

// update answers GET /agent/v1/update (CONTRACT §9, §15): 200 with the
// agent build to install, or 204 when the agent should stay as it is.
//
// The appliance carries one agent build per platform, of its own version
// (app.Version): its own executable and the other platforms' binaries the
// release put in DataDir/install/. An endpoint that is not pinned is offered
// that build when it is newer than the agent's version; a pinned endpoint
// is offered it only when it is exactly the pinned version and the agent
// runs another one (so pinning also brings an agent back to the pin). No
// binary for the platform, or an agent whose version is not a semantic
// version while unpinned, is 204.
//
// The agent's os, arch and version come from the query (wire.UpdateQuery*),
// else from what the endpoint last reported.
func (h *Handler) update(w http.ResponseWriter, r *http.Request, e *app.Endpoint) {
	q := r.URL.Query()
	goos, arch, version := orDefault(q.Get(wire.UpdateQueryOS), e.OS), orDefault(q.Get(wire.UpdateQueryArch), e.Arch),
		orDefault(q.Get(wire.UpdateQueryVersion), e.AgentVersion)
	if msg := checkPlatform(goos, arch); msg != "" {
		if goos == "" && arch == "" {
			w.WriteHeader(http.StatusNoContent) // never reported its platform: nothing to offer yet
			return
		}
		writeError(w, http.StatusUnprocessableEntity, app.EINVALID, msg)
		return
	}
	if !offerAgent(app.Version, version, e.PinnedAgentVersion) || h.opts.Install == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	name := AgentBinaryName(goos, arch)
	sum, ok := h.opts.Install.Sum(name)
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, wire.Update{Version: app.Version, Available: true, URL: "/install/bin/" + name, SHA256: sum})
}

// offerAgent decides whether an agent running version should install the
// build of version carried (see update).
func offerAgent(carried, version, pinned string) bool {
	if pinned != "" {
		same, ok := app.CompareSemver(carried, pinned)
		if !ok || same != 0 {
			return false
		}
		cmp, ok := app.CompareSemver(carried, version)
		return !ok || cmp != 0
	}
	newer, ok := app.SemverNewer(carried, version)
	return ok && newer
}

// AgentBinaryName is the /install/bin/ file of the agent for a platform.
func AgentBinaryName(goos, arch string) string { return "backstop-" + goos + "-" + arch }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
