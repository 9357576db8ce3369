package archive

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"strings"

	"backstop/app"
	"backstop/app/archive/chain"

	"golang.org/x/mod/sumdb/tlog"
)

var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// View is the channel's API shape.
func (c *Channel) View() ChannelView {
	v := ChannelView{ID: c.ID, TenantID: c.TenantID, Kind: c.Kind, DisplayName: c.DisplayName, State: c.State,
		LastMessageAt: app.AtPtr(c.LastMessageAt), MessagesTotal: c.MessagesTotal, Messages24h: c.Messages24h,
		Rejected24h: c.Rejected24h, CreatedAt: app.At(c.CreatedAt)}
	if c.Address != "" {
		v.Address = &c.Address
	}
	if c.SourceID != "" {
		v.SourceID = &c.SourceID
	}
	if c.LastError != "" {
		v.LastError = &c.LastError
	}
	return v
}

// CreateChannel creates a capture channel. An smtp_journal channel gets
// the address <16 random lowercase base32 characters>@SMTPDomain; imap and
// m365 channels name their source.
func (s *Service) CreateChannel(ctx context.Context, spec ChannelSpec) (*Channel, error) {
	if spec.TenantID == "" {
		return nil, app.Errorf(app.EINVALID, "tenantId is required")
	}
	name := strings.TrimSpace(spec.DisplayName)
	c := &Channel{ID: app.NewID(PrefixChannel), TenantID: spec.TenantID, Kind: spec.Kind, DisplayName: name,
		State: ChannelIdle, CreatedAt: s.cfg.Now().UTC()}
	switch spec.Kind {
	case KindSMTPJournal:
		if s.cfg.SMTPDomain == "" {
			return nil, app.Errorf(app.EINVALID, "archive.smtp_domain is not configured")
		}
		var b [10]byte
		rand.Read(b[:])
		c.Address = tokenEncoding.EncodeToString(b[:]) + "@" + strings.ToLower(s.cfg.SMTPDomain)
	case KindIMAP, KindM365:
		if spec.SourceID == "" {
			return nil, app.Errorf(app.EINVALID, "sourceId is required for a %s channel", spec.Kind)
		}
		c.SourceID = spec.SourceID
	default:
		return nil, app.Errorf(app.EINVALID, "kind must be smtp_journal, imap or m365")
	}
	if c.DisplayName == "" {
		c.DisplayName = spec.Kind
	}
	if err := s.cfg.Store.CreateArchiveChannel(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Channels lists a tenant's channels ("" for every tenant).
func (s *Service) Channels(ctx context.Context, tenantID string) ([]*Channel, error) {
	return s.cfg.Store.ArchiveChannels(ctx, tenantID)
}

// Channel reads a channel.
func (s *Service) Channel(ctx context.Context, id string) (*Channel, error) {
	return s.cfg.Store.ArchiveChannel(ctx, id)
}

// DeleteChannel stops a channel (its records keep naming it).
func (s *Service) DeleteChannel(ctx context.Context, id string) error {
	return s.cfg.Store.DeleteArchiveChannel(ctx, id, s.cfg.Now())
}

// StatusView is GET /archive/status.
type StatusView struct {
	TenantID string        `json:"tenantId"`
	Messages int64         `json:"messages"`
	Bytes    int64         `json:"bytes"`
	Chain    StatusChain   `json:"chain"`
	Channels []ChannelView `json:"channels"`
}

// StatusChain is the chain part of StatusView.
type StatusChain struct {
	Size         int64     `json:"size"`
	CheckpointAt *app.Time `json:"checkpointAt"`
	State        string    `json:"state" enum:"ok,broken,empty"`
}

// Status is a tenant's archive status.
func (s *Service) Status(ctx context.Context, tenantID string) (*StatusView, error) {
	v := &StatusView{TenantID: tenantID, Channels: []ChannelView{}}
	var err error
	if v.Messages, v.Bytes, err = s.cfg.Store.ArchiveStats(ctx, tenantID); err != nil {
		return nil, err
	}
	cv, err := s.Chain(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	v.Chain = StatusChain{Size: cv.Size, CheckpointAt: cv.CheckpointAt, State: cv.State}
	chs, err := s.Channels(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	for _, c := range chs {
		v.Channels = append(v.Channels, c.View())
	}
	return v, nil
}

// Summary is the status response's archive part (CONTRACT §4): messages
// kept and the chain state over the tenant (or, for "", every tenant):
// empty (no records), broken (the last verification of any failed),
// unverified (records never verified), intact.
func (s *Service) Summary(ctx context.Context, tenantID string) (messages int64, chainState string, err error) {
	if messages, _, err = s.cfg.Store.ArchiveStats(ctx, tenantID); err != nil {
		return 0, "", err
	}
	tenants := []string{tenantID}
	if tenantID == "" {
		if tenants, err = s.cfg.Store.ArchiveTenants(ctx); err != nil {
			return 0, "", err
		}
	}
	chainState = ChainEmpty
	for _, t := range tenants {
		st, err := s.cfg.Store.ArchiveState(ctx, t)
		if err != nil {
			return 0, "", err
		}
		if st.State == ChainBroken {
			return messages, ChainBroken, nil
		}
		n, err := s.cfg.Store.ArchiveSize(ctx, t)
		if err != nil {
			return 0, "", err
		}
		switch {
		case n == 0:
		case st.LastVerifiedAt == nil:
			chainState = "unverified"
		case chainState == ChainEmpty:
			chainState = "intact"
		}
	}
	return messages, chainState, nil
}

// Chain is GET /archive/chain: the latest checkpoint and the state.
func (s *Service) Chain(ctx context.Context, tenantID string) (*ChainView, error) {
	v := &ChainView{TenantID: tenantID, Origin: s.cfg.Origin(tenantID), VerifierKey: s.cfg.Signer.VerifierKey(), State: ChainEmpty}
	st, err := s.cfg.Store.ArchiveState(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	v.LastVerifiedAt = app.AtPtr(st.LastVerifiedAt)
	cp, err := s.cfg.Store.LatestArchiveCheckpoint(ctx, tenantID)
	if app.ErrorCode(err) == app.ENOTFOUND {
		if n, err := s.cfg.Store.ArchiveSize(ctx, tenantID); err != nil {
			return nil, err
		} else if n > 0 || st.State == ChainBroken {
			v.State = st.State
		}
		return v, nil
	} else if err != nil {
		return nil, err
	}
	v.Size = cp.Size
	v.RootHash = base64.StdEncoding.EncodeToString(cp.Root)
	v.CheckpointAt = app.AtPtr(&cp.At)
	v.State = st.State
	return v, nil
}

// Checkpoint is the latest signed checkpoint note of the tenant,
// signing one first when records are not covered yet.
func (s *Service) Checkpoint(ctx context.Context, tenantID string) (*StoredCheckpoint, error) {
	cp, err := s.intake.checkpoint(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if cp == nil {
		return nil, app.Errorf(app.ENOTFOUND, "the tenant's archive has no records yet")
	}
	return cp, nil
}

// RecordProof is GET /archive/records/{index}?proof=true.
type RecordProof struct {
	Index      int64    `json:"index"`
	Record     string   `json:"record"`
	LeafHash   string   `json:"leafHash"`
	Proof      []string `json:"proof,omitempty" doc:"Inclusion proof (base64 hashes) against checkpoint."`
	Checkpoint string   `json:"checkpoint,omitempty" doc:"The signed note the proof is against."`
}

// Record reads a record and, with proof, its inclusion proof against the
// latest checkpoint (signed first if it does not cover the record).
func (s *Service) Record(ctx context.Context, tenantID string, index int64, proof bool) (*RecordProof, error) {
	text, err := s.cfg.Store.ArchiveRecord(ctx, tenantID, index)
	if err != nil {
		return nil, err
	}
	lh := chain.LeafHash(text)
	v := &RecordProof{Index: index, Record: string(text), LeafHash: base64.StdEncoding.EncodeToString(lh[:])}
	if !proof {
		return v, nil
	}
	cp, err := s.cfg.Store.LatestArchiveCheckpoint(ctx, tenantID)
	if (err == nil && cp.Size <= index) || app.ErrorCode(err) == app.ENOTFOUND {
		cp, err = s.Checkpoint(ctx, tenantID)
	}
	if err != nil {
		return nil, err
	}
	p, err := tlog.ProveRecord(cp.Size, index, s.cfg.Store.ArchiveHashReader(tenantID))
	if err != nil {
		return nil, err
	}
	v.Proof = hashes64(p)
	v.Checkpoint = cp.Note
	return v, nil
}

// Consistency is GET /archive/chain/consistency.
type Consistency struct {
	From  int64    `json:"from"`
	To    int64    `json:"to"`
	Proof []string `json:"proof"`
}

// Consistency proves that the tree of size to extends the tree of size
// from (0 < from <= to <= size; otherwise app.EINVALID).
func (s *Service) Consistency(ctx context.Context, tenantID string, from, to int64) (*Consistency, error) {
	n, err := s.cfg.Store.ArchiveSize(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if from < 1 || from > to || to > n {
		return nil, app.Errorf(app.EINVALID, "need 0 < from <= to <= %d (the log's size)", n)
	}
	p, err := tlog.ProveTree(to, from, s.cfg.Store.ArchiveHashReader(tenantID))
	if err != nil {
		return nil, err
	}
	return &Consistency{From: from, To: to, Proof: hashes64(p)}, nil
}

func hashes64(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return out
}
