package m365

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
)

// maxRenames bounds the "name (restored N).ext" candidates tried for one
// file.
const maxRenames = 50

// RestoreFiles uploads files under req.Folder at the drive root, keeping
// the folder structure, skipping files already there with the same
// content. A file whose name is taken by different content is never
// overwritten: it is uploaded as "name (restored N).ext", the first N free
// or holding the same content (so a second run adds nothing either).
func RestoreFiles(ctx context.Context, c *graph.Client, req RestoreRequest, open Opener, progress Progress) (*RestoreResult, error) {
	ec := errContext{permission: permFiles, mailbox: req.UserID, restore: true}
	prog := app.NewProgressReporter(progress)
	prog.Phase("transferring")
	d, err := c.UserDrive(ctx, req.UserID)
	if err != nil {
		return nil, failure(c, ec, err)
	}
	top, err := c.EnsureDriveFolder(ctx, d.ID, "root", req.Folder)
	if err != nil {
		return nil, failure(c, ec, err)
	}
	folders := map[string]string{"": top.ID}
	ensure := func(p string) (string, error) {
		p = strings.Trim(p, "/")
		if id, ok := folders[p]; ok {
			return id, nil
		}
		parent, cur := top.ID, ""
		for _, seg := range strings.Split(p, "/") {
			cur = path.Join(cur, seg)
			if id, ok := folders[cur]; ok {
				parent = id
				continue
			}
			f, err := c.EnsureDriveFolder(ctx, d.ID, parent, seg)
			if err != nil {
				return "", err
			}
			folders[cur], parent = f.ID, f.ID
		}
		return parent, nil
	}
	var files []blobstore.Item
	for _, it := range req.Items {
		switch it.Kind {
		case KindFile:
			files = append(files, it)
		case KindFolder:
			if p := strings.Trim(path.Join(it.Path), "/"); p != "" && p != "." {
				if _, err := ensure(p); err != nil {
					return nil, failure(c, ec, err)
				}
			}
		}
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	prog.AddTotals(int64(len(files)), 0)
	res := &RestoreResult{}
	for _, it := range files {
		dir := strings.Trim(it.Path, "/")
		ref := path.Join(dir, it.Name)
		parentID, err := ensure(dir)
		if err == nil {
			var skipped bool
			skipped, err = restoreFile(ctx, c, d.ID, parentID, path.Join(req.Folder, dir), it, open)
			if err == nil && skipped {
				res.Skipped++
			} else if err == nil {
				res.Restored++
			}
		}
		if err != nil {
			fe := failure(c, ec, err)
			if mailboxWide(fe) {
				return nil, fe
			}
			res.Failed = append(res.Failed, ItemFailure{ItemID: it.ID, Ref: ref, Err: fe})
		}
		prog.AddDone(1, it.Size)
	}
	prog.Flush()
	return res, nil
}

// restoreFile uploads one file into parentID (at dirPath below the root).
func restoreFile(ctx context.Context, c *graph.Client, driveID, parentID, dirPath string, it blobstore.Item, open Opener) (bool, error) {
	want, err := storedQuickXor(ctx, it, open)
	if err != nil {
		return false, err
	}
	for n := 0; n <= maxRenames; n++ {
		name := restoredName(it.Name, n)
		rc, err := open(ctx, it.Content)
		if err != nil {
			return false, err
		}
		_, err = c.UploadFile(ctx, driveID, parentID, name, it.Size, rc)
		rc.Close()
		if err == nil {
			return false, nil
		}
		if graph.StatusOf(err) != 409 && !graph.IsCode(err, "nameAlreadyExists") {
			return false, err
		}
		existing, gerr := c.DriveItemByPath(ctx, driveID, path.Join(dirPath, name))
		if gerr != nil {
			return false, gerr
		}
		if existing.File != nil && existing.File.Hashes.QuickXorHash == want {
			return true, nil
		}
	}
	return false, fmt.Errorf("%s: %d restored copies with other content already exist", it.Name, maxRenames)
}

// storedQuickXor is the file's quickXorHash as the backup recorded it, or
// computed from the stored bytes.
func storedQuickXor(ctx context.Context, it blobstore.Item, open Opener) (string, error) {
	var fm FileMeta
	if json.Unmarshal(it.Meta, &fm) == nil && fm.QuickXorHash != "" {
		return fm.QuickXorHash, nil
	}
	rc, err := open(ctx, it.Content)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	h := graph.NewQuickXorHash()
	if _, err := io.Copy(h, rc); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// restoredName is name for n = 0, else "base (restored n).ext".
func restoredName(name string, n int) string {
	if n == 0 {
		return name
	}
	ext := path.Ext(name)
	if ext == name {
		ext = ""
	}
	return fmt.Sprintf("%s (restored %d)%s", strings.TrimSuffix(name, ext), n, ext)
}
