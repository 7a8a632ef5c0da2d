package imagecache_test

import (
	encjson "encoding/json"
	"strconv"
)

func json(v any) ([]byte, error) { return encjson.Marshal(v) }

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }
