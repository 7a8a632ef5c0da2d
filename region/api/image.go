package api

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"time"
)

// OS images (ARCHITECTURE.md "Images"). An image's bytes live once per SHA-256 on the
// region's disk (--images-dir), its metadata in PostgreSQL; racks fetch an image into their
// cache on first use and serve it to their machines (RackImagePath). Bytes never enter a
// workflow payload: a workflow names an image by Name and SHA256 (ImageRef).
//
//	GET    /api/v1/images                  -> []Image (every authenticated role but machine)
//	GET    /api/v1/images/{name}           -> Image
//	PUT    /api/v1/images/{name}?arch=&format=&compression=&sha256=   the image's bytes -> Image (admin)
//	DELETE /api/v1/images/{name}           (admin)
//	GET    /api/v1/images/{name}/data      the bytes, with Range (racks, admin)
const ImagesPath = PathPrefix + "/images"

// RackImagePath is where a rack's HTTP boot serves an image to its machines: RackImagePath +
// the image's Name, with Range.
const RackImagePath = "/images/"

// Image is one uploaded OS image.
type Image struct {
	Name        string    `json:"Name"`
	Arch        string    `json:"Arch"`        // ImageArches
	Format      string    `json:"Format"`      // ImageFormats: what the bytes hold once decompressed
	Compression string    `json:"Compression"` // ImageCompressions: how the stored bytes are compressed
	SHA256      string    `json:"SHA256"`      // of the stored bytes, lowercase hex
	Size        int64     `json:"Size"`        // of the stored bytes
	Uploaded    time.Time `json:"Uploaded"`
	UploadedBy  string    `json:"UploadedBy"`
}

// ImageRef names an image by its content, as a machine deployed with it records it: a
// region holds the same image when it has this Name with this SHA256.
type ImageRef struct {
	Name   string `json:"Name"`
	SHA256 string `json:"SHA256"`
}

// The values of an image's Arch, Format and Compression; the first of each is the default.
var (
	ImageArches       = []string{"amd64", "arm64"}
	ImageFormats      = []string{"raw", "qcow2"}
	ImageCompressions = []string{"none", "gzip", "zstd"}
)

// Upload query parameters of PUT /api/v1/images/{name}.
const (
	ImageParamArch        = "arch"
	ImageParamFormat      = "format"
	ImageParamCompression = "compression"
	ImageParamSHA256      = "sha256" // optional: the upload is refused unless the bytes hash to it
)

var imageName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$`)

// ValidImageName says why name cannot name an image: 1 to 63 letters, digits, '.', '_' and
// '-', starting with a letter or digit, so it is one path segment on the region and the rack.
func ValidImageName(name string) error {
	if !imageName.MatchString(name) {
		return fmt.Errorf("image name %q: want 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// ValidSHA256 says why s is not a SHA-256 in lowercase hex.
func ValidSHA256(s string) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 || hex.EncodeToString(b) != s {
		return fmt.Errorf("SHA-256 %q: want 64 lowercase hex digits", s)
	}
	return nil
}

// ValidImageOption says why value is not one of the allowed values of the option named what.
func ValidImageOption(what, value string, allowed []string) error {
	if !slices.Contains(allowed, value) {
		return fmt.Errorf("image %s %q: want one of %v", what, value, allowed)
	}
	return nil
}

// HeaderImageSHA256 carries the SHA-256 of the image an answer's bytes belong to.
const HeaderImageSHA256 = "X-Ironflow-Image-SHA256"

// ServeImage answers r with the bytes of img read from content, with Range, If-Range and HEAD
// (http.ServeContent; the ETag is the hash): the region and the racks serve images this one way.
func ServeImage(w http.ResponseWriter, r *http.Request, img Image, content io.ReadSeeker) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"sha256:`+img.SHA256+`"`)
	w.Header().Set(HeaderImageSHA256, img.SHA256)
	http.ServeContent(w, r, "", img.Uploaded, content)
}
