package main

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

var users = noun[api.User]{
	kind:     api.KindUsers,
	one:      "user",
	resource: (*client.Client).Users,
	columns: []column[api.User]{
		{"NAME", func(u api.User) string { return u.Name }},
		{"ROLE", func(u api.User) string { return u.Role }},
		{"CREATED", func(u api.User) string { return cellTime(u.Created) }},
	},
}

func newUsersCommand() *cobra.Command {
	return users.command(users.list(), users.show(), newUserCreateCommand(), newUserTokenCommand(), users.remove())
}

func newUserCreateCommand() *cobra.Command {
	var role string
	c := &cobra.Command{
		Use:   "create NAME --role ROLE",
		Short: "Create a user",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRole(role); err != nil {
				return err
			}
			created, err := regionClient(cmd).Users().Create(cmd.Context(), api.User{Name: args[0], Role: role})
			if err != nil {
				return err
			}
			return users.print(cmd, created)
		},
	}
	c.Flags().StringVar(&role, "role", "", "role: "+strings.Join(api.Roles, ", "))
	c.MarkFlagRequired("role")
	return c
}

func newUserTokenCommand() *cobra.Command {
	var role string
	var ttl time.Duration
	c := &cobra.Command{
		Use:   "token NAME [--role ROLE] [--ttl DURATION]",
		Short: "Mint a token for a user and print it (it is shown only once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if role != "" {
				if err := checkRole(role); err != nil {
					return err
				}
			}
			if ttl < 0 {
				return fmt.Errorf("--ttl %s: must not be negative", ttl)
			}
			tok, err := regionClient(cmd).MintToken(cmd.Context(), args[0], api.TokenRequest{Role: role, TTL: ttl})
			if apiErr := (*client.APIError)(nil); errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound && !apiErr.Foreign {
				return fmt.Errorf("%w: create the user first: %s", err, userCreateCommand(cmd, args[0], role))
			}
			if err != nil {
				return err
			}
			// Bare, so that IRONFLOW_TOKEN=$(ironflow users token NAME) works.
			_, err = fmt.Fprintln(cmd.OutOrStdout(), tok.Token)
			return err
		},
	}
	c.Flags().StringVar(&role, "role", "", "narrow the token to this role (default: the user's role)")
	c.Flags().DurationVar(&ttl, "ttl", 0, "token lifetime, e.g. 24h (default: no expiry)")
	return c
}

// userCreateCommand is the command line that creates user name on the -E region, with role
// (default: readonly, the least a person gets).
func userCreateCommand(cmd *cobra.Command, name, role string) string {
	if role == "" {
		role = api.RoleReadonly
	}
	return fmt.Sprintf("ironflow -E %s users create %s --role %s", flagValue(cmd, flagEndpoint), name, role)
}

func checkRole(role string) error {
	if !slices.Contains(api.Roles, role) {
		return fmt.Errorf("unknown role %q (want one of %s)", role, strings.Join(api.Roles, ", "))
	}
	return nil
}
