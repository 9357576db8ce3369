package restapi

import (
	"context"
	"net/http"

	"backstop/app"
)

// Webhook management (scope webhooks:manage). Webhooks belong to a tenant:
// a provider caller names it in X-Service-Tenant to write, and reads
// without the header cover every tenant (each webhook carries tenantId).

type webhookListInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string `query:"cursor" maxLength:"64" doc:"nextCursor of the previous page."`
}

type webhookListOutput struct {
	Body struct {
		Items      []*app.Webhook `json:"items"`
		NextCursor *string        `json:"nextCursor"`
	}
}

func (s *Server) listWebhooks(ctx context.Context, in *webhookListInput) (*webhookListOutput, error) {
	if in.Cursor != "" && !app.HasPrefix(in.Cursor, app.PrefixWebhook) {
		return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	hooks, err := s.Webhooks.Webhooks(ctx, app.WebhookFilter{TenantID: principalFrom(ctx).tenantID, AfterID: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out := &webhookListOutput{}
	out.Body.Items = nonNilSlice(hooks)
	if len(hooks) == in.Limit {
		out.Body.NextCursor = app.Ptr(hooks[len(hooks)-1].ID)
	}
	return out, nil
}

type createWebhookInput struct {
	Body struct {
		URL         string   `json:"url" minLength:"1" maxLength:"2048" doc:"https URL of the receiver (http only where the operator allows private targets)."`
		Events      []string `json:"events" minItems:"1" uniqueItems:"true" enum:"job.failed,job.completed,verify.completed" doc:"Event types to send. The test event is sent on request whatever is chosen."`
		Description string   `json:"description,omitempty" maxLength:"500"`
		Enabled     *bool    `json:"enabled,omitempty" doc:"Default true."`
	}
}

type webhookWithSecret struct {
	*app.Webhook
	Secret string `json:"secret" doc:"The signing secret (whsec_…). Shown only here: it cannot be read again, only rotated."`
}

type webhookSecretOutput struct {
	Status int
	Body   webhookWithSecret
}

func (s *Server) createWebhook(ctx context.Context, in *createWebhookInput) (*webhookSecretOutput, error) {
	tenant := principalFrom(ctx).tenantID
	if tenant == "" {
		return nil, newProblem(app.ETENANTREQUIRED, "Name the tenant the webhook belongs to in X-Service-Tenant.")
	}
	w := &app.Webhook{TenantID: tenant, URL: in.Body.URL, Events: in.Body.Events, Description: in.Body.Description, Enabled: true}
	if in.Body.Enabled != nil {
		w.Enabled = *in.Body.Enabled
	}
	secret, err := s.Webhooks.CreateWebhook(ctx, w)
	if err != nil {
		return nil, err
	}
	return &webhookSecretOutput{Status: http.StatusCreated, Body: webhookWithSecret{Webhook: w, Secret: secret}}, nil
}

type webhookIDInput struct {
	ID string `path:"id" maxLength:"64"`
}

type webhookOutput struct{ Body *app.Webhook }

func (s *Server) getWebhook(ctx context.Context, in *webhookIDInput) (*webhookOutput, error) {
	w, err := s.Webhooks.Webhook(ctx, principalFrom(ctx).tenantID, in.ID)
	return &webhookOutput{Body: w}, err
}

type updateWebhookInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		URL         *string  `json:"url,omitempty" minLength:"1" maxLength:"2048"`
		Events      []string `json:"events,omitempty" minItems:"1" uniqueItems:"true" enum:"job.failed,job.completed,verify.completed"`
		Description *string  `json:"description,omitempty" maxLength:"500"`
		Enabled     *bool    `json:"enabled,omitempty" doc:"A disabled webhook gets no new deliveries and its pending ones wait."`
	}
}

func (s *Server) updateWebhook(ctx context.Context, in *updateWebhookInput) (*webhookOutput, error) {
	b := in.Body
	w, err := s.Webhooks.UpdateWebhook(ctx, principalFrom(ctx).tenantID, in.ID,
		app.WebhookUpdate{URL: b.URL, Events: b.Events, Description: b.Description, Enabled: b.Enabled})
	return &webhookOutput{Body: w}, err
}

func (s *Server) deleteWebhook(ctx context.Context, in *webhookIDInput) (*struct{}, error) {
	return nil, s.Webhooks.DeleteWebhook(ctx, principalFrom(ctx).tenantID, in.ID)
}

func (s *Server) rotateWebhookSecret(ctx context.Context, in *webhookIDInput) (*webhookSecretOutput, error) {
	secret, w, err := s.Webhooks.RotateSecret(ctx, principalFrom(ctx).tenantID, in.ID)
	if err != nil {
		return nil, err
	}
	return &webhookSecretOutput{Status: http.StatusOK, Body: webhookWithSecret{Webhook: w, Secret: secret}}, nil
}

type deliveryOutput struct {
	Status int
	Body   *app.Delivery
}

func (s *Server) testWebhook(ctx context.Context, in *webhookIDInput) (*deliveryOutput, error) {
	d, err := s.Webhooks.SendTest(ctx, principalFrom(ctx).tenantID, in.ID)
	return &deliveryOutput{Status: http.StatusAccepted, Body: d}, err
}

type deliveryListInput struct {
	ID     string `path:"id" maxLength:"64"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string `query:"cursor" maxLength:"64" doc:"nextCursor of the previous page."`
}

type deliveryListOutput struct {
	Body struct {
		Items      []*app.Delivery `json:"items"`
		NextCursor *string         `json:"nextCursor"`
	}
}

func (s *Server) listDeliveries(ctx context.Context, in *deliveryListInput) (*deliveryListOutput, error) {
	if in.Cursor != "" && !app.HasPrefix(in.Cursor, app.PrefixDelivery) {
		return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	ds, err := s.Webhooks.Deliveries(ctx, principalFrom(ctx).tenantID, app.DeliveryFilter{WebhookID: in.ID, BeforeID: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out := &deliveryListOutput{}
	out.Body.Items = nonNilSlice(ds)
	if len(ds) == in.Limit {
		out.Body.NextCursor = app.Ptr(ds[len(ds)-1].ID)
	}
	return out, nil
}

type replayInput struct {
	ID         string `path:"id" maxLength:"64"`
	DeliveryID string `path:"deliveryId" maxLength:"64"`
}

func (s *Server) replayDelivery(ctx context.Context, in *replayInput) (*deliveryOutput, error) {
	d, err := s.Webhooks.Replay(ctx, principalFrom(ctx).tenantID, in.ID, in.DeliveryID)
	return &deliveryOutput{Status: http.StatusAccepted, Body: d}, err
}

// webhookRoutes registers the webhook operations (called from routes).
func (s *Server) webhookRoutes() {
	const sc = app.ScopeWebhooksManage
	op(s, http.MethodGet, "webhooks.list", "/api/v1/webhooks", accessKey, sc, "List webhooks", s.listWebhooks)
	op(s, http.MethodPost, "webhooks.create", "/api/v1/webhooks", accessKey, sc, "Register a webhook; the signing secret is shown once", s.createWebhook)
	op(s, http.MethodGet, "webhooks.get", "/api/v1/webhooks/{id}", accessKey, sc, "One webhook", s.getWebhook)
	op(s, http.MethodPatch, "webhooks.update", "/api/v1/webhooks/{id}", accessKey, sc, "Change a webhook's URL, events, description or enabled state", s.updateWebhook)
	op(s, http.MethodDelete, "webhooks.delete", "/api/v1/webhooks/{id}", accessKey, sc, "Delete a webhook with its deliveries", s.deleteWebhook)
	op(s, http.MethodPost, "webhooks.rotateSecret", "/api/v1/webhooks/{id}/rotate-secret", accessKey, sc,
		"Replace the signing secret (shown once); the old one also signs for 24 h", s.rotateWebhookSecret)
	op(s, http.MethodPost, "webhooks.test", "/api/v1/webhooks/{id}/test", accessKey, sc, "Send a webhook.test event to this webhook", s.testWebhook)
	op(s, http.MethodGet, "webhooks.deliveries", "/api/v1/webhooks/{id}/deliveries", accessKey, sc, "The webhook's deliveries with every attempt, newest first", s.listDeliveries)
	op(s, http.MethodPost, "webhooks.replay", "/api/v1/webhooks/{id}/deliveries/{deliveryId}/replay", accessKey, sc,
		"Send a delivery's event again as a new delivery", s.replayDelivery)
	// Test and replay queue a delivery and answer 202 (their Status field);
	// document that instead of the 200 huma assumes for a POST.
	for _, path := range []string{"/api/v1/webhooks/{id}/test", "/api/v1/webhooks/{id}/deliveries/{deliveryId}/replay"} {
		if o := s.api.OpenAPI().Paths[path].Post; o != nil && o.Responses["200"] != nil {
			o.Responses["202"] = o.Responses["200"]
			o.Responses["202"].Description = "Accepted: the delivery is queued."
			delete(o.Responses, "200")
		}
	}
}
