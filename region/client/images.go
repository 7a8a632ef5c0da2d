package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/ironflow/ironflow/region/api"
)

// OS images (region/api/image.go), under api.ImagesPath.

const imagesSegment = "images"

// ImageUpload is what UploadImage sends besides the bytes; empty options take the region's
// defaults, and a non-empty SHA256 makes the region refuse bytes that do not hash to it.
type ImageUpload struct {
	Name, Arch, Format, Compression, SHA256 string
}

// UploadImage streams size bytes of data to the region as the image up.Name.
func (c *Client) UploadImage(ctx context.Context, up ImageUpload, data io.Reader, size int64) (api.Image, error) {
	q := url.Values{}
	for name, v := range map[string]string{
		api.ImageParamArch: up.Arch, api.ImageParamFormat: up.Format,
		api.ImageParamCompression: up.Compression, api.ImageParamSHA256: up.SHA256,
	} {
		if v != "" {
			q.Set(name, v)
		}
	}
	body := Upload{ContentType: "application/octet-stream", Data: data, Size: size}
	return callAt[api.Image](ctx, c, Request{Method: http.MethodPut, Query: q, Body: body}, imagesSegment, up.Name)
}

// Images lists the region's images.
func (c *Client) Images(ctx context.Context) ([]api.Image, error) {
	return call[[]api.Image](ctx, c, Request{Method: http.MethodGet, Path: api.ImagesPath})
}

// Image shows the image called name.
func (c *Client) Image(ctx context.Context, name string) (api.Image, error) {
	return callKey[api.Image](ctx, c, http.MethodGet, nil, imagesSegment, name)
}

// DeleteImage deletes the image called name.
func (c *Client) DeleteImage(ctx context.Context, name string) error {
	path, err := keyPath(imagesSegment, name)
	if err != nil {
		return err
	}
	return c.send(ctx, Request{Method: http.MethodDelete, Path: path})
}

// DownloadImage streams the bytes of the image called name from byte offset on. The answer
// is only the rest of the image of hash sha (If-Range): when the region's image of that name
// has other bytes now, the answer is the whole new image from 0, Stream.StatusCode 200
// instead of 206, and its header api.HeaderImageSHA256 names the new hash.
func (c *Client) DownloadImage(ctx context.Context, name, sha string, offset int64) (Stream, error) {
	path, err := keyPath(imagesSegment, name, "data")
	if err != nil {
		return Stream{}, err
	}
	h := http.Header{"Accept": {"application/octet-stream"}}
	if offset > 0 {
		h.Set("Range", fmt.Sprintf("bytes=%d-", offset))
		h.Set("If-Range", `"sha256:`+sha+`"`)
	}
	return c.DoStream(ctx, Request{Method: http.MethodGet, Path: path, Header: h})
}
