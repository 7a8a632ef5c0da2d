package rack

import (
	"context"
	"path/filepath"

	"github.com/ironflow/ironflow/rack/imagecache"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// DefaultImageCacheBytes bounds the rack's image cache unless configured.
const DefaultImageCacheBytes = 32 << 30

// imageCacheDir is the image cache's directory in the rack's state dir.
const imageCacheDir = "images"

// Image implements imagecache.Source with the rack's token.
func (r regionAPI) Image(ctx context.Context, name string) (api.Image, error) {
	return r.region().Image(asRack(ctx), name)
}

// DownloadImage implements imagecache.Source with the rack's token.
func (r regionAPI) DownloadImage(ctx context.Context, name, sha string, offset int64) (client.Stream, error) {
	return r.region().DownloadImage(asRack(ctx), name, sha, offset)
}

// openImages opens the cache of the images the rack's HTTP boot serves its machines.
func (p *process) openImages() error {
	if p.o.HTTPListen == "" {
		return nil
	}
	dir := p.o.ImageCacheDir
	if dir == "" {
		dir = filepath.Join(p.o.StateDir, imageCacheDir)
	}
	var err error
	p.images, err = imagecache.Open(imagecache.Config{Dir: dir, MaxBytes: p.o.ImageCacheBytes, Source: p.ctrl.region, Logger: p.log})
	return err
}
