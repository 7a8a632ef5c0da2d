package store

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// OS images' metadata (region/api/image.go). Their bytes are files named by SHA-256 that the
// caller places and removes (region/images) inside the store's lock of that hash, so an
// upload and a delete of the same bytes under two names never leave a row without its file.

// imageLock is the first key of the advisory locks that serialise placing and removing the
// file of one hash ("imag"); the second is the hash of the SHA-256.
const imageLock int32 = 0x696d6167

const imageColumns = "name, arch, format, compression, sha256, size, uploaded, uploaded_by"

func scanImage(row pgx.CollectableRow) (api.Image, error) {
	var img api.Image
	err := row.Scan(&img.Name, &img.Arch, &img.Format, &img.Compression, &img.SHA256, &img.Size, &img.Uploaded, &img.UploadedBy)
	return img, err
}

// ValidImageOptions says why img's name, arch, format or compression cannot be stored: what
// an upload is checked for before its bytes are read.
func ValidImageOptions(img api.Image) error {
	for _, err := range []error{
		api.ValidImageName(img.Name),
		api.ValidImageOption("arch", img.Arch, api.ImageArches),
		api.ValidImageOption("format", img.Format, api.ImageFormats),
		api.ValidImageOption("compression", img.Compression, api.ImageCompressions),
	} {
		if err != nil {
			return invalidf("%v", err)
		}
	}
	return nil
}

// ValidImage is ValidImageOptions and the hash.
func ValidImage(img api.Image) error {
	if err := ValidImageOptions(img); err != nil {
		return err
	}
	if err := api.ValidSHA256(img.SHA256); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// CreateImage records img, calling place to put its file in position first, under the lock
// of its hash. An image of that name with the same content and options is returned as it is
// (a retried upload), with created false; one with other content is ErrConflict.
func (s *Store) CreateImage(ctx context.Context, by Principal, img api.Image, place func() error) (out api.Image, created bool, err error) {
	if err := ValidImage(img); err != nil {
		return api.Image{}, false, err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockImageHash(ctx, tx, img.SHA256); err != nil {
			return err
		}
		old, found, err := imageNamed(ctx, tx, img.Name)
		if err != nil {
			return err
		}
		if found {
			if old.SHA256 != img.SHA256 || old.Arch != img.Arch || old.Format != img.Format || old.Compression != img.Compression {
				return conflictf("image %s exists with SHA-256 %s (%s, %s, %s); delete it first to upload other content under its name",
					old.Name, old.SHA256, old.Arch, old.Format, old.Compression)
			}
			out = old
		}
		// Placed again for a retried upload too: a delete whose commit failed after it
		// removed the file left the row, and this upload restores its bytes.
		if err := place(); err != nil {
			return err
		}
		if found {
			return nil
		}
		rows, err := tx.Query(ctx, `INSERT INTO images (name, arch, format, compression, sha256, size, uploaded_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+imageColumns,
			img.Name, img.Arch, img.Format, img.Compression, img.SHA256, img.Size, by.User)
		if err != nil {
			return err
		}
		if out, err = pgx.CollectExactlyOneRow(rows, scanImage); err != nil {
			return err
		}
		created = true
		return recordEvent(ctx, tx, by, "image-upload", "images", img.Name,
			map[string]any{"SHA256": img.SHA256, "Size": img.Size, "Arch": img.Arch, "Format": img.Format, "Compression": img.Compression})
	})
	return out, created, err
}

// Images lists every image by name.
func (s *Store) Images(ctx context.Context) ([]api.Image, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+imageColumns+" FROM images ORDER BY name")
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, scanImage)
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// Image returns the image called name.
func (s *Store) Image(ctx context.Context, name string) (api.Image, error) {
	img, found, err := imageNamed(ctx, s.pool, name)
	if err != nil {
		return api.Image{}, classify(err)
	}
	if !found {
		return api.Image{}, notFoundf("image %s not found", name)
	}
	return img, nil
}

func imageNamed(ctx context.Context, q querier, name string) (api.Image, bool, error) {
	rows, err := q.Query(ctx, "SELECT "+imageColumns+" FROM images WHERE name = $1", name)
	if err != nil {
		return api.Image{}, false, err
	}
	img, err := pgx.CollectExactlyOneRow(rows, scanImage)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Image{}, false, nil
	}
	return img, err == nil, err
}

// DeleteImage deletes the image called name, refusing (ErrInUse) while a machine is deployed
// with it, and calls remove with its hash when no other image has the same bytes.
func (s *Store) DeleteImage(ctx context.Context, by Principal, name string, remove func(sha string) error) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		img, found, err := imageNamed(ctx, tx, name)
		if err != nil {
			return err
		}
		if !found {
			return notFoundf("image %s not found", name)
		}
		if err := lockImageHash(ctx, tx, img.SHA256); err != nil {
			return err
		}
		users, err := queryStrings(ctx, tx, `SELECT 'machine ' || name || ' (' || uuid || ')' FROM machines
			WHERE doc->'Image'->>'Name' = $1 AND doc->'Image'->>'Name' <> '' AND doc->'Image'->>'SHA256' = $2 ORDER BY name LIMIT 20`,
			img.Name, img.SHA256)
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return &DependencyError{Kind: "image", Key: img.Name, Dependents: users}
		}
		if _, err := tx.Exec(ctx, "DELETE FROM images WHERE name = $1", name); err != nil {
			return err
		}
		var shared bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM images WHERE sha256 = $1)", img.SHA256).Scan(&shared); err != nil {
			return err
		}
		if err := recordEvent(ctx, tx, by, "image-delete", "images", img.Name, map[string]any{"SHA256": img.SHA256, "Size": img.Size}); err != nil {
			return err
		}
		if shared {
			return nil
		}
		// Removed before the commit, under the hash's lock: a failed commit leaves a row
		// without its file (its download answers 404 until it is uploaded again), never a
		// file that a concurrent upload of the same bytes believes placed and that is gone.
		return remove(img.SHA256)
	})
}

func lockImageHash(ctx context.Context, tx pgx.Tx, sha string) error {
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", imageLock, sha)
	return err
}

// deployedImage is a moving machine's name and the image it is deployed with, if any.
type deployedImage struct {
	machine string
	image   *api.ImageRef
}

// missingImages names, for each machine deployed with an image this region has not under
// that name with that SHA-256, the image it lacks: a move never leaves a deployed machine
// on a region that cannot deploy it again.
func missingImages(ctx context.Context, q querier, ms []deployedImage) ([]string, error) {
	var names, shas, who []string
	for _, m := range ms {
		if m.image != nil {
			names, shas, who = append(names, m.image.Name), append(shas, m.image.SHA256), append(who, m.machine)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	return queryStrings(ctx, q, `
		SELECT 'machine ' || r.machine || ' is deployed with image ' || r.name || ' (SHA-256 ' || r.sha || '), which this region lacks: upload it here first (ironflow images upload ' || r.name || ' FILE)'
		FROM unnest($1::text[], $2::text[], $3::text[]) AS r(name, sha, machine)
		WHERE NOT EXISTS (SELECT 1 FROM images i WHERE i.name = r.name AND i.sha256 = r.sha)
		ORDER BY 1`, names, shas, who)
}

// refuseMissingImages is missingImages of one machine as an ErrConflict.
func refuseMissingImages(ctx context.Context, q querier, m *api.Machine) error {
	missing, err := missingImages(ctx, q, []deployedImage{{m.Name, m.Image}})
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return conflictf("%s", strings.Join(missing, "; "))
	}
	return nil
}
