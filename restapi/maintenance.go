package restapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"backstop/app"
)

func (s *Server) maintenanceRoutes() {
	op(s, http.MethodPost, "maintenance.announce", "/api/v1/maintenance", accessSession, "",
		"Announce an update to the version the update check found (provider administrators)", s.announceMaintenance)
	op(s, http.MethodDelete, "maintenance.cancel", "/api/v1/maintenance", accessSession, "",
		"Cancel an announced update or clear a failed one (provider administrators)", s.cancelMaintenance)
}

type announceMaintenanceInput struct {
	Body struct {
		TargetVersion string     `json:"targetVersion" minLength:"1" maxLength:"64" doc:"The latest version of the update check (with or without the leading v)."`
		StartsAt      *time.Time `json:"startsAt,omitempty" doc:"When to start; absent: at once."`
	}
}

type maintenanceOutput struct{ Body *app.Maintenance }

// maintenanceRunning reports whether an update is past its announcement
// and not yet ended; such an update can be neither replaced nor cancelled.
func maintenanceRunning(m *app.Maintenance) bool {
	return m != nil && m.Phase != app.MaintenanceAnnounced && m.Phase != app.MaintenanceFailed
}

func (s *Server) announceMaintenance(ctx context.Context, in *announceMaintenanceInput) (*maintenanceOutput, error) {
	if s.Maintenance == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "The updater is not available in this build.")
	}
	if !principalFrom(ctx).provider {
		return nil, forbidden("Only provider administrators update the appliance.")
	}
	v, err := s.versionInfo(ctx)
	if err != nil {
		return nil, err
	}
	target := strings.TrimPrefix(in.Body.TargetVersion, "v")
	if v.Latest == nil || *v.Latest != target || v.UpdateAvailable == nil || !*v.UpdateAvailable {
		return nil, app.FieldError("body.targetVersion", "%q is not the newer version the update check found", in.Body.TargetVersion)
	}
	m, err := s.Maintenance.UpdateMaintenance(ctx, func(cur *app.Maintenance) (*app.Maintenance, error) {
		if maintenanceRunning(cur) {
			return nil, app.Errorf(app.ECONFLICT, "An update to %s is running (%s).", cur.TargetVersion, cur.Phase)
		}
		m := &app.Maintenance{Phase: app.MaintenanceAnnounced, TargetVersion: target, FromVersion: s.opts.Version}
		if in.Body.StartsAt != nil {
			m.StartsAt = app.AtPtr(app.Ptr(in.Body.StartsAt.UTC()))
		}
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	return &maintenanceOutput{Body: m}, nil
}

type cancelMaintenanceOutput struct{}

func (s *Server) cancelMaintenance(ctx context.Context, _ *struct{}) (*cancelMaintenanceOutput, error) {
	if s.Maintenance == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "The updater is not available in this build.")
	}
	if !principalFrom(ctx).provider {
		return nil, forbidden("Only provider administrators update the appliance.")
	}
	_, err := s.Maintenance.UpdateMaintenance(ctx, func(cur *app.Maintenance) (*app.Maintenance, error) {
		if cur == nil {
			return nil, app.NotFound("maintenance")
		}
		if maintenanceRunning(cur) {
			return nil, app.Errorf(app.ECONFLICT, "The update to %s is running (%s) and cannot be cancelled.", cur.TargetVersion, cur.Phase)
		}
		return nil, nil
	})
	return &cancelMaintenanceOutput{}, err
}
