package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/images"
	"github.com/ironflow/ironflow/region/store"
)

// Resources of the images (region/api/image.go): their metadata, which every role but a
// machine reads and only an admin writes (as MAAS lets only admins manage boot resources),
// and their bytes, which only racks (to serve their machines) and admins download.
const (
	resImages    = "images"
	resImageData = "imagedata"
)

// imageContentType is the only media type of an image upload.
const imageContentType = "application/octet-stream"

// DefaultImageMaxBytes is the largest image an upload may carry unless configured.
const DefaultImageMaxBytes = 64 << 30

// imageIdleTimeout is how long an image upload or download may go without moving a byte: a
// large image may take far longer than the server's timeouts as a whole, a stalled one not.
const imageIdleTimeout = time.Minute

func (s *Server) imageRoutes() {
	item := api.ImagesPath + "/{name}"
	s.handle(route{pattern: "GET " + api.ImagesPath, resource: resImages, h: s.listImages})
	s.handle(route{pattern: "GET " + item, resource: resImages, h: s.showImage})
	s.handle(route{pattern: "PUT " + item, resource: resImages, write: true, h: s.uploadImage})
	s.handle(route{pattern: "DELETE " + item, resource: resImages, write: true, h: s.deleteImage})
	s.handle(route{pattern: "GET " + item + "/data", resource: resImageData, h: s.downloadImage})
}

// imageBlobs is the region's images directory, or 503 when it has none.
func (s *Server) imageBlobs() (*images.Blobs, error) {
	if s.blobs == nil {
		return nil, errorf(http.StatusServiceUnavailable, "this region stores no image bytes: start it with --images-dir")
	}
	return s.blobs, nil
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request, _ *call) error {
	list, err := s.st.Images(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) showImage(w http.ResponseWriter, r *http.Request, _ *call) error {
	img, err := s.st.Image(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, img)
	return nil
}

// uploadImage stores the request body as the image of the path's name. Its options come from
// the query (api.ImageParam…), each checked before a byte is read; the body is hashed as it is
// written to a temporary file and is stored only when whole, under the size limit and, when
// the query names one, with that SHA-256.
func (s *Server) uploadImage(w http.ResponseWriter, r *http.Request, c *call) error {
	// Only a body sent as bytes is an image: a JSON body (a confused client, the abuse
	// suite) is refused before anything is written.
	if ct := r.Header.Get("Content-Type"); ct != imageContentType {
		return errorf(http.StatusUnsupportedMediaType, "an image upload is sent as %s, not %q", imageContentType, ct)
	}
	blobs, err := s.imageBlobs()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	option := func(name string, allowed []string) string {
		if v := q.Get(name); v != "" {
			return v
		}
		return allowed[0]
	}
	img := api.Image{
		Name:        r.PathValue("name"),
		Arch:        option(api.ImageParamArch, api.ImageArches),
		Format:      option(api.ImageParamFormat, api.ImageFormats),
		Compression: option(api.ImageParamCompression, api.ImageCompressions),
		SHA256:      q.Get(api.ImageParamSHA256),
	}
	if err := store.ValidImageOptions(img); err != nil {
		return err
	}
	if img.SHA256 != "" {
		if err := api.ValidSHA256(img.SHA256); err != nil {
			return errorf(http.StatusUnprocessableEntity, "%v", err)
		}
	}
	max := s.cfg.ImageMaxBytes
	if r.ContentLength > max {
		return errorf(http.StatusRequestEntityTooLarge, "image is %d bytes, more than this region's limit of %d", r.ContentLength, max)
	}
	staged, err := blobs.Stage(&idleReader{r: r.Body, rc: http.NewResponseController(w)}, max, img.SHA256)
	switch {
	case errors.Is(err, images.ErrTooLarge):
		return errorf(http.StatusRequestEntityTooLarge, "image is more than this region's limit of %d bytes", max)
	case errors.Is(err, images.ErrMismatch):
		return errorf(http.StatusUnprocessableEntity, "image %s refused, nothing stored: %v", img.Name, err)
	case err != nil:
		return errorf(http.StatusBadRequest, "image %s: upload cut off, nothing stored: %v", img.Name, err)
	}
	defer staged.Discard() // a no-op once placed
	if err := extendDeadlines(w, s.cfg.Limits.orDefault().WriteTimeout); err != nil {
		return fmt.Errorf("answer upload: %w", err)
	}
	img.SHA256, img.Size = staged.SHA256, staged.Size
	stored, created, err := s.st.CreateImage(r.Context(), c.by, img, staged.Place)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, stored)
	return nil
}

func (s *Server) deleteImage(w http.ResponseWriter, r *http.Request, c *call) error {
	name := r.PathValue("name")
	if _, err := s.st.Image(r.Context(), name); err != nil {
		return err
	}
	blobs, err := s.imageBlobs()
	if err != nil {
		return err
	}
	if err := s.st.DeleteImage(r.Context(), c.by, name, blobs.Remove); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// downloadImage serves an image's bytes with Range and If-Range (its ETag is its hash), so a
// rack resumes a download cut off.
func (s *Server) downloadImage(w http.ResponseWriter, r *http.Request, _ *call) error {
	img, err := s.st.Image(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	blobs, err := s.imageBlobs()
	if err != nil {
		return err
	}
	f, err := blobs.Open(img.SHA256)
	if err != nil {
		return errorf(http.StatusNotFound, "image %s has no bytes on this region process's disk (SHA-256 %s): upload it again", img.Name, img.SHA256)
	}
	defer f.Close()
	api.ServeImage(&idleWriter{ResponseWriter: w, rc: http.NewResponseController(w)}, r, img, f)
	return nil
}

// idleReader reads a request body, giving the request imageIdleTimeout more to read and to
// answer at every read.
type idleReader struct {
	r  io.Reader
	rc *http.ResponseController
}

func (i *idleReader) Read(p []byte) (int, error) {
	until := time.Now().Add(imageIdleTimeout)
	if err := errors.Join(i.rc.SetReadDeadline(until), i.rc.SetWriteDeadline(until)); err != nil {
		return 0, err
	}
	return i.r.Read(p)
}

// idleWriter gives an answer imageIdleTimeout more at every write.
type idleWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (i *idleWriter) Write(p []byte) (int, error) {
	until := time.Now().Add(imageIdleTimeout)
	if err := errors.Join(i.rc.SetReadDeadline(until), i.rc.SetWriteDeadline(until)); err != nil {
		return 0, err
	}
	return i.ResponseWriter.Write(p)
}
