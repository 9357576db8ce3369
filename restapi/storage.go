package restapi

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"strings"

	"backstop/app"

	"github.com/danielgtaylor/huma/v2"
)

// Storage targets (CONTRACT §11): GET /storage for integrations (status:read);
// listing, creating and changing targets and the one download of the
// appliance key for provider administrators in the web interface.

func (s *Server) storageRoutes() {
	get(s, "storage.get", "/api/v1/storage", app.ScopeStatusRead, "Storage targets and their state (not paged)", s.getStorage)
	op(s, http.MethodGet, "storageTargets.list", "/api/v1/storage-targets", accessSession, "",
		"List storage targets (provider administrators)", s.listStorageTargets)
	op(s, http.MethodPost, "storageTargets.create", "/api/v1/storage-targets", accessSession, "",
		"Add a storage target; it is checked (write, read, conditional create, delete) before the answer, 422 storage_target_unusable with the reason otherwise",
		s.createStorageTarget)
	op(s, http.MethodPatch, "storageTargets.update", "/api/v1/storage-targets/{id}", accessSession, "",
		"Rename a target, make it the default, place tenants on it (for new data) or change its S3 credentials (checked before they are saved)",
		s.updateStorageTarget)
	op(s, http.MethodPost, "storage.applianceKey", "/api/v1/storage/appliance-key", accessSession, "",
		"Download the appliance key file, once (provider administrators); later calls are 410", s.downloadApplianceKey)
	if o := s.api.OpenAPI().Paths["/api/v1/storage/appliance-key"]; o != nil && o.Post != nil {
		resp := o.Post.Responses["200"]
		resp.Description = "The key file. Keep it apart from the appliance: without it, a lost data directory loses the data."
		resp.Content = map[string]*huma.MediaType{"application/octet-stream": {
			Schema: &huma.Schema{Type: "string", Format: "binary"}}}
		if forbidden := o.Post.Responses["403"]; forbidden != nil {
			o.Post.Responses["410"] = &huma.Response{Description: "Gone: the key was already downloaded (the answer says when and by whom).",
				Content: forbidden.Content}
			o.Post.Responses["503"] = &huma.Response{Description: "The appliance key does not exist yet.", Content: forbidden.Content}
		}
	}
}

// StorageOverview is the answer of GET /api/v1/storage.
type StorageOverview struct {
	State       string               `json:"state" enum:"ok,degraded,full,unreachable" doc:"The worst state of the listed targets (unreachable, full, degraded, ok)."`
	UsedBytes   int64                `json:"usedBytes" doc:"Bytes in use, summed over the listed targets that can tell (S3 targets count nothing), each file system once."`
	FreeBytes   int64                `json:"freeBytes" doc:"Bytes free, summed over the listed targets that can tell (S3 targets count nothing), each file system once."`
	StoredBytes int64                `json:"storedBytes" doc:"What Backstop keeps on the listed targets; for one tenant, that tenant's share."`
	Targets     []*app.StorageTarget `json:"targets" doc:"For one tenant: the target its new data goes to (its placement, else the default) and any target still holding its data. Otherwise every target."`
}

type storageOutput struct{ Body StorageOverview }

func (s *Server) getStorage(ctx context.Context, _ *struct{}) (*storageOutput, error) {
	o, err := s.storageOverview(ctx, principalFrom(ctx).tenantID)
	if err != nil {
		return nil, err
	}
	return &storageOutput{Body: o}, nil
}

// storageOverview is what GET /storage, the status's storage object and
// /readyz all read: the targets' last checked state, from the database.
// It never waits for a target.
func (s *Server) storageOverview(ctx context.Context, tenantID string) (StorageOverview, error) {
	o := StorageOverview{State: app.StorageOK, Targets: []*app.StorageTarget{}}
	if s.Storage == nil {
		return o, nil
	}
	ts, err := s.Storage.Targets(ctx, app.StorageTargetFilter{ForTenant: tenantID})
	if err != nil {
		return o, err
	}
	counted := map[string]bool{} // file systems whose space is summed already
	for _, t := range ts {
		o.State = app.WorseStorageState(o.State, t.State)
		o.StoredBytes += t.StoredBytes
		if t.Filesystem != "" {
			if counted[t.Filesystem] {
				continue
			}
			counted[t.Filesystem] = true
		}
		if t.UsedBytes != nil {
			o.UsedBytes += *t.UsedBytes
		}
		if t.FreeBytes != nil {
			o.FreeBytes += *t.FreeBytes
		}
	}
	o.Targets = nonNilSlice(ts)
	return o, nil
}

// requireProvider refuses tenant administrators: storage is the appliance's.
func requireProvider(ctx context.Context) error {
	if !principalFrom(ctx).provider {
		return forbidden("Only provider administrators manage storage targets.")
	}
	return nil
}

type storageTargetsOutput struct {
	Body struct {
		Items      []*app.StorageTarget `json:"items" doc:"In creation order, with storedBytes of all tenants."`
		NextCursor *string              `json:"nextCursor"`
	}
}

func (s *Server) listStorageTargets(ctx context.Context, in *pageInput) (*storageTargetsOutput, error) {
	if err := requireProvider(ctx); err != nil {
		return nil, err
	}
	if in.Cursor != "" && !app.HasPrefix(in.Cursor, app.PrefixStorage) {
		return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	ts, err := s.Storage.Targets(ctx, app.StorageTargetFilter{AfterID: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out := &storageTargetsOutput{}
	out.Body.Items = nonNilSlice(ts)
	if len(ts) > 0 {
		out.Body.NextCursor = nextCursor(len(ts), in.Limit, ts[len(ts)-1].ID)
	}
	return out, nil
}

type createStorageTargetInput struct {
	Body struct {
		Name            string   `json:"name" minLength:"1" maxLength:"200"`
		Kind            string   `json:"kind" enum:"local,s3"`
		Path            string   `json:"path,omitempty" maxLength:"4096" doc:"local: absolute path of an existing directory (mount it first)."`
		Endpoint        string   `json:"endpoint,omitempty" maxLength:"260" doc:"s3: host name and optional :port of the S3 API, without scheme (tls chooses HTTPS)."`
		Region          string   `json:"region,omitempty" maxLength:"64" doc:"s3: region, if the provider needs one."`
		Bucket          string   `json:"bucket,omitempty" maxLength:"63" doc:"s3: an existing bucket."`
		Prefix          string   `json:"prefix,omitempty" maxLength:"512" doc:"s3: key prefix inside the bucket."`
		AccessKeyID     string   `json:"accessKeyId,omitempty" maxLength:"256" doc:"s3: access key id."`
		SecretAccessKey string   `json:"secretAccessKey,omitempty" maxLength:"1024" doc:"s3: secret access key; stored sealed and never shown again."`
		PathStyle       *bool    `json:"pathStyle,omitempty" doc:"s3: path-style addressing; default false."`
		TLS             *bool    `json:"tls,omitempty" doc:"s3: HTTPS; default true."`
		Default         bool     `json:"default,omitempty" doc:"Make this the default target (the previous default stops being it)."`
		TenantIDs       []string `json:"tenantIds,omitempty" maxItems:"10000" doc:"Tenants whose new data goes here (each moves from any other target)."`
	}
}

type storageTargetOutput struct{ Body *app.StorageTarget }

func (s *Server) createStorageTarget(ctx context.Context, in *createStorageTargetInput) (*storageTargetOutput, error) {
	if err := requireProvider(ctx); err != nil {
		return nil, err
	}
	b := in.Body
	spec := app.StorageTargetSpec{Name: b.Name, Kind: b.Kind, Default: b.Default, TenantIDs: b.TenantIDs}
	switch b.Kind {
	case app.StorageKindLocal:
		for field, v := range map[string]string{"endpoint": b.Endpoint, "region": b.Region, "bucket": b.Bucket, "prefix": b.Prefix,
			"accessKeyId": b.AccessKeyID, "secretAccessKey": b.SecretAccessKey} {
			if v != "" {
				return nil, app.FieldError(field, "%s applies to s3 targets only", field)
			}
		}
		if b.PathStyle != nil || b.TLS != nil {
			return nil, app.FieldError("tls", "pathStyle and tls apply to s3 targets only")
		}
		if strings.TrimSpace(b.Path) == "" {
			return nil, app.FieldError("path", "path is required for a local target")
		}
		spec.Path = b.Path
	case app.StorageKindS3:
		if b.Path != "" {
			return nil, app.FieldError("path", "path applies to local targets only")
		}
		spec.S3 = app.S3Settings{Endpoint: b.Endpoint, Region: b.Region, Bucket: b.Bucket, Prefix: b.Prefix,
			AccessKeyID: b.AccessKeyID, SecretAccessKey: b.SecretAccessKey, TLS: true}
		if b.PathStyle != nil {
			spec.S3.PathStyle = *b.PathStyle
		}
		if b.TLS != nil {
			spec.S3.TLS = *b.TLS
		}
	}
	t, err := s.Storage.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &storageTargetOutput{Body: t}, nil
}

type updateStorageTargetInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		Name            *string   `json:"name,omitempty" minLength:"1" maxLength:"200"`
		Default         *bool     `json:"default,omitempty" doc:"true makes this the default target; the default cannot be unset, only moved."`
		TenantIDs       *[]string `json:"tenantIds,omitempty" maxItems:"10000" doc:"Exactly the tenants placed here from now on; moving a tenant applies to new data."`
		AccessKeyID     *string   `json:"accessKeyId,omitempty" maxLength:"256" doc:"s3: new access key id."`
		SecretAccessKey *string   `json:"secretAccessKey,omitempty" maxLength:"1024" doc:"s3: new secret access key; checked before it is saved, never shown."`
	}
}

func (s *Server) updateStorageTarget(ctx context.Context, in *updateStorageTargetInput) (*storageTargetOutput, error) {
	if err := requireProvider(ctx); err != nil {
		return nil, err
	}
	b := in.Body
	t, err := s.Storage.Update(ctx, in.ID, app.StorageTargetUpdate{Name: b.Name, Default: b.Default, TenantIDs: b.TenantIDs,
		AccessKeyID: b.AccessKeyID, SecretAccessKey: b.SecretAccessKey})
	if err != nil {
		return nil, err
	}
	return &storageTargetOutput{Body: t}, nil
}

// ApplianceKeyFileName is the name the appliance key is downloaded as.
const ApplianceKeyFileName = "backstop-appliance.key"

type applianceKeyOutput struct {
	ContentType        string `header:"Content-Type"`
	ContentDisposition string `header:"Content-Disposition"`
	Body               []byte
}

// downloadApplianceKey answers the appliance key file once. The download
// (time, administrator) is committed before the key is sent, so a second
// call, even a concurrent one, is 410 and says who has it.
func (s *Server) downloadApplianceKey(ctx context.Context, _ *struct{}) (*applianceKeyOutput, error) {
	if err := requireProvider(ctx); err != nil {
		return nil, err
	}
	if s.ApplianceKey == nil || s.ApplianceKeys == nil {
		return nil, newProblem("unavailable", "The appliance key does not exist yet.")
	}
	key, err := s.ApplianceKey()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, newProblem("unavailable", "The appliance key does not exist yet.")
	} else if err != nil {
		return nil, err
	}
	p := principalFrom(ctx)
	earlier, err := s.ApplianceKeys.RecordApplianceKeyDownload(ctx, app.ApplianceKeyDownload{At: s.now(), UserID: p.user.ID, UserEmail: p.user.Email})
	if err != nil {
		return nil, err
	}
	if earlier != nil {
		return nil, app.Errorf(app.EGONE, "The appliance key was already downloaded, on %s by %s (%s); it is offered only once.",
			app.At(earlier.At), earlier.UserEmail, earlier.UserID)
	}
	return &applianceKeyOutput{ContentType: "application/octet-stream",
		ContentDisposition: `attachment; filename="` + ApplianceKeyFileName + `"`, Body: key}, nil
}
