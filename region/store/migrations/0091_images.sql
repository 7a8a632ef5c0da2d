-- OS images (region/store/images.go): their bytes are files of the region's images dir named
-- by SHA-256 (region/images); a row names them. Several names may share one file: a file is
-- removed only when no row has its hash.
CREATE TABLE images (
    name        text PRIMARY KEY,
    arch        text NOT NULL,
    format      text NOT NULL,
    compression text NOT NULL,
    sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size        bigint NOT NULL CHECK (size >= 0),
    uploaded    timestamptz NOT NULL DEFAULT now(),
    uploaded_by text NOT NULL
);
CREATE INDEX images_sha256 ON images (sha256);

-- The machines deployed with an image, which keep it from being deleted.
CREATE INDEX machines_image ON machines ((doc->'Image'->>'Name')) WHERE doc->'Image'->>'Name' <> '';
