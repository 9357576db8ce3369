package main

import (
	"log/slog"
	"net/http"

	"backstop/agentapi"
	"backstop/app"
	"backstop/assets"
	"backstop/store"
)

// mountAgent registers what agents and install commands call: the agent API
// under /agent/v1/ and the install files under /install/. jobChanged, if
// set, is told every job change agents report (for live progress streams);
// jobEnded, if set, once of each job an agent's run ended (for metrics).
func mountAgent(mux *http.ServeMux, db *store.DB, cfg app.Config, logger *slog.Logger, jobChanged, jobEnded func(*app.Job)) {
	install := &agentapi.Install{DataDir: cfg.DataDir, PublicURL: cfg.PublicURL, Script: assets.AgentInstallScript}
	mux.Handle("/agent/v1/", agentapi.New(agentapi.Services{Endpoints: db, Enrollment: db, Agents: db, Jobs: db},
		agentapi.Options{PublicURL: cfg.PublicURL, DataDir: cfg.DataDir, Logger: logger.With("component", "agentapi"),
			JobChanged: jobChanged, JobEnded: jobEnded, Install: install}))
	mux.Handle("/install/", install)
}
