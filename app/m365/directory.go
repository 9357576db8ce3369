package m365

import (
	"context"
	"sort"
	"strings"
	"sync"

	"backstop/app"
	"backstop/app/graph"
)

// purposeWorkers is how many $batch requests of mailbox purposes run at
// once (each holds graph.MaxBatch users).
const purposeWorkers = 8

// SyncDirectory reads every user with licences (SKU part numbers from
// /subscribedSkus) and mailbox purpose (through $batch). Kind comes from
// mailboxSettings.userPurpose: shared → shared mailbox, room and equipment
// → room, anything else a user. A user whose purpose cannot be read has no
// mailbox (HasMailbox false) and stays a user.
func SyncDirectory(ctx context.Context, c *graph.Client, progress Progress) ([]DirectoryUser, error) {
	prog := app.NewProgressReporter(progress)
	prog.Phase("scanning")
	skus, err := c.SubscribedSkus(ctx)
	if err != nil {
		return nil, failure(c, errContext{permission: permOrganization}, err)
	}
	partNumber := make(map[string]string, len(skus))
	for _, s := range skus {
		partNumber[strings.ToLower(s.SkuID)] = s.SkuPartNumber
	}
	var out []DirectoryUser
	err = c.Users(ctx, func(users []graph.User) error {
		for _, u := range users {
			d := DirectoryUser{ExternalID: u.ID, Kind: app.DirectoryUser, DisplayName: u.DisplayName,
				Email: u.Mail, UserPrincipalName: u.UserPrincipalName, Enabled: u.AccountEnabled}
			for _, l := range u.AssignedLicenses {
				name := partNumber[strings.ToLower(l.SkuID)]
				if name == "" {
					name = l.SkuID
				}
				d.Licenses = append(d.Licenses, name)
			}
			sort.Strings(d.Licenses)
			d.Licensed = len(d.Licenses) > 0
			out = append(out, d)
		}
		prog.AddTotals(int64(len(users)), 0)
		return nil
	})
	if err != nil {
		return nil, failure(c, errContext{permission: permUsers}, err)
	}
	prog.Phase("transferring")
	if err := readPurposes(ctx, c, out, prog); err != nil {
		return nil, failure(c, errContext{permission: permMailbox}, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ExternalID < out[j].ExternalID })
	prog.Phase("done")
	return out, nil
}

// readPurposes fills Kind and HasMailbox, asking for graph.MaxBatch users
// per UserPurposes call, purposeWorkers calls at a time.
func readPurposes(ctx context.Context, c *graph.Client, users []DirectoryUser, prog *app.ProgressReporter) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan []DirectoryUser)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range purposeWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for chunk := range chunks {
				ids := make([]string, len(chunk))
				for i := range chunk {
					ids[i] = chunk[i].ExternalID
				}
				purposes, err := c.UserPurposes(ctx, ids)
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					continue
				}
				for i := range chunk {
					p, ok := purposes[chunk[i].ExternalID]
					chunk[i].HasMailbox = ok && p != ""
					chunk[i].Kind = kindOf(p)
				}
				prog.AddDone(int64(len(chunk)), 0)
			}
		}()
	}
feed:
	for i := 0; i < len(users); i += graph.MaxBatch {
		select {
		case chunks <- users[i:min(i+graph.MaxBatch, len(users))]:
		case <-ctx.Done():
			break feed
		}
	}
	close(chunks)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

func kindOf(purpose string) string {
	switch strings.ToLower(purpose) {
	case "shared":
		return app.DirectorySharedMailbox
	case "room", "equipment":
		return app.DirectoryRoom
	}
	return app.DirectoryUser
}
