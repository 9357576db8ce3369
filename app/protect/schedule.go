package protect

import (
	"context"

	"backstop/app"
)

// Schedules of protected objects, kept as job schedules the runner's cron
// fires (a firing is skipped while the previous job on the object is still
// queued or running):
//
//   - backup: every object whose backups are scheduled (protected, source
//     present and enabled), on its source's schedule or the default daily
//     one; the spec follows the source's when it changes;
//   - verify: every protected object with a snapshot, daily at 06:MM UTC
//     (a stored verify spec is kept as it is).
//
// Objects that no longer qualify, or no longer exist, lose their schedules.

// SyncSchedules brings the stored schedules in line with the objects and
// reports whether it changed anything (the caller then reloads the
// runner's schedules).
func SyncSchedules(ctx context.Context, objects app.ProtectedObjectService, schedules app.JobScheduleService) (bool, error) {
	objs, err := objects.ProtectedObjects(ctx, app.ProtectedObjectFilter{})
	if err != nil {
		return false, err
	}
	list, err := schedules.JobSchedules(ctx)
	if err != nil {
		return false, err
	}
	type key struct{ action, target string }
	have := map[key]*app.JobSchedule{}
	for _, s := range list {
		if s.TargetType == app.TargetProtectedObject {
			have[key{s.Action, s.TargetID}] = s
		}
	}
	changed := false
	save := func(o *app.ProtectedObject, action, spec string) error {
		changed = true
		return schedules.SaveJobSchedule(ctx, &app.JobSchedule{TenantID: o.TenantID, Action: action,
			TargetType: app.TargetProtectedObject, TargetID: o.ID, Spec: spec, Enabled: true})
	}
	for _, o := range objs {
		bk, vk := key{app.ActionBackup, o.ID}, key{app.ActionVerify, o.ID}
		if o.Scheduled() {
			if s := have[bk]; s == nil || s.Spec != o.BackupSchedule() {
				if err := save(o, app.ActionBackup, o.BackupSchedule()); err != nil {
					return changed, err
				}
			}
			delete(have, bk)
		}
		if o.Protected && o.LastSnapshotID != "" {
			if have[vk] == nil {
				if err := save(o, app.ActionVerify, app.DefaultObjectVerifySchedule(o.ID)); err != nil {
					return changed, err
				}
			}
			delete(have, vk)
		}
	}
	for _, s := range have { // objects that no longer qualify or exist
		if err := schedules.DeleteJobSchedule(ctx, s.ID); err != nil && app.ErrorCode(err) != app.ENOTFOUND {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}
