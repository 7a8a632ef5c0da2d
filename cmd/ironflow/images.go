package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// OS images (ARCHITECTURE.md "Images"): stored on the region, fetched and served by racks.

var imageColumns = []column[api.Image]{
	{"NAME", func(i api.Image) string { return i.Name }},
	{"ARCH", func(i api.Image) string { return i.Arch }},
	{"FORMAT", func(i api.Image) string { return i.Format }},
	{"COMPRESSION", func(i api.Image) string { return i.Compression }},
	{"SIZE", func(i api.Image) string { return strconv.FormatInt(i.Size, 10) }},
	{"SHA256", func(i api.Image) string { return i.SHA256 }},
	{"UPLOADED", func(i api.Image) string { return cellTime(i.Uploaded) }},
}

func newImagesCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "images",
		Short: "Upload, list, show and delete the OS images racks serve to their machines",
		Long: "OS images live on the region (its --images-dir, one file per SHA-256) with their metadata in its database. " +
			"A rack fetches an image the first time one of its machines asks for it, verifies its SHA-256, keeps it in a " +
			"bounded cache and serves it over its HTTP boot (http://RACK:5248/images/NAME, with range requests).",
	}
	c.AddCommand(newImagesUploadCommand(), newImagesListCommand(), newImagesShowCommand(), newImagesDeleteCommand())
	return c
}

func newImagesUploadCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "upload NAME FILE",
		Short: "Upload FILE as the image NAME (admin only)",
		Long: "Upload FILE as the image NAME, streamed. Its SHA-256 is computed here first and the region refuses the upload, " +
			"storing nothing, unless what it received hashes to it; --sha256 checks the file against a published hash first. " +
			"Uploading the same file under the same name again changes nothing; other bytes under a taken name are refused " +
			"(delete the image first). Takes an admin token.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			up := client.ImageUpload{Name: args[0]}
			flags := cmd.Flags()
			up.Arch, _ = flags.GetString("arch")
			up.Format, _ = flags.GetString("format")
			up.Compression, _ = flags.GetString("compression")
			want, _ := flags.GetString("sha256")
			f, err := os.Open(args[1])
			if err != nil {
				return err
			}
			defer f.Close()
			info, err := f.Stat()
			if err != nil {
				return err
			}
			if up.SHA256, err = fileSHA256(f); err != nil {
				return err
			}
			if want != "" && strings.ToLower(want) != up.SHA256 {
				return fmt.Errorf("%s has SHA-256 %s, not %s: nothing uploaded", args[1], up.SHA256, want)
			}
			img, err := regionClient(cmd).UploadImage(cmd.Context(), up, f, info.Size())
			if err != nil {
				return err
			}
			return render(cmd, img, []api.Image{img}, imageColumns)
		},
	}
	c.Flags().String("arch", api.ImageArches[0], "the architecture the image runs on: "+strings.Join(api.ImageArches, ", "))
	c.Flags().String("format", api.ImageFormats[0], "the disk image's format once decompressed: "+strings.Join(api.ImageFormats, ", "))
	c.Flags().String("compression", api.ImageCompressions[0], "how FILE is compressed: "+strings.Join(api.ImageCompressions, ", "))
	c.Flags().String("sha256", "", "the SHA-256 FILE must have (hex), e.g. from the image's published checksums")
	return c
}

// fileSHA256 hashes f from its start and seeks back to it, for the upload.
func fileSHA256(f *os.File) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", f.Name(), err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func newImagesListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the region's images with their sizes and SHA-256",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := regionClient(cmd).Images(cmd.Context())
			if err != nil {
				return err
			}
			return render(cmd, list, list, imageColumns)
		},
	}
}

func newImagesShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show one image",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			img, err := regionClient(cmd).Image(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return render(cmd, img, []api.Image{img}, imageColumns)
		},
	}
}

func newImagesDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an image no machine is deployed with (admin only)",
		Long: "Delete the image NAME; its file goes when no other image has the same bytes. Refused while a machine is " +
			"deployed with it. Racks keep their cached copy until their cache needs the room. Takes an admin token.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := regionClient(cmd).DeleteImage(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "Deleted image %s\n", args[0])
			return err
		},
	}
}
