package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/client"
)

// probeTimeout bounds the look at /api/v1/info that tells a region from another server.
const probeTimeout = 5 * time.Second

// explainRegionError rewrites the region client's errors that leave a newcomer stuck into
// what to do: a missing or refused token, an -E that is not a URL, an -E that answers but is
// not an Ironflow region. Other errors are returned unchanged.
func explainRegionError(ctx context.Context, cmd *cobra.Command, err error) error {
	if cmd == nil || cmd.Flags().Lookup(flagEndpoint) == nil {
		return err
	}
	endpoint := flagValue(cmd, flagEndpoint)
	var apiErr *client.APIError
	var urlErr *url.Error
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized && !apiErr.Foreign:
		if flagValue(cmd, flagToken) == "" {
			return fmt.Errorf("region %s needs an API token: set %s or --token (%w)", endpoint, envToken, err)
		}
		return fmt.Errorf("region %s refused the API token (%w): check %s or --token", endpoint, err, envToken)
	case errors.As(err, &urlErr):
		if problem := endpointProblem(endpoint); problem != "" {
			return errors.New(problem)
		}
		return fmt.Errorf("%w (is a region running at %s? set -E or %s)", err, endpoint, envEndpoint)
	case errors.As(err, &apiErr) && apiErr.Foreign, errors.As(err, &syntaxErr):
		if why := notARegion(ctx, cmd); why != "" {
			return fmt.Errorf("%s is not an Ironflow region (%s): point -E or %s at a region API, e.g. %s",
				endpoint, why, envEndpoint, defaultEndpoint)
		}
	}
	return err
}

// endpointProblem says what is wrong with an endpoint that is not an http(s) URL with a host,
// or "" when it is one.
func endpointProblem(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return ""
	}
	return fmt.Sprintf("-E %q (or %s) is not a region URL: write it with its scheme, e.g. http://%s",
		endpoint, envEndpoint, strings.TrimPrefix(strings.TrimPrefix(endpoint, "//"), "/"))
}

// maxReason bounds how much of another server's answer a message quotes (an HTML page).
const maxReason = 160

// oneLine is text with its whitespace runs made single spaces, cut at max bytes.
func oneLine(text string, max int) string {
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > max {
		text = text[:max] + "..."
	}
	return text
}

// notARegion asks the -E server for its region info; it returns why that server is not a
// region, or "" when it answers as one.
func notARegion(ctx context.Context, cmd *cobra.Command) string {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	info, err := regionClient(cmd).Info(ctx)
	switch {
	case err != nil:
		return "GET /api/v1/info: " + oneLine(err.Error(), maxReason)
	case info.Name == "":
		return "GET /api/v1/info names no region"
	}
	return ""
}
