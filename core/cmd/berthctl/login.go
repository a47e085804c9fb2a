package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/cmd/berthctl/internal/adminclient"
)

func (a *app) loginCmd() *cobra.Command {
	c := a.command("login", "Check and store the admin API's address and token file", exactArgs(), a.login)
	c.Long = `login checks that the admin API at --address accepts the token in
--token-file (GetInstallation; for a project key, ListSessions) and stores
both, the token file as an absolute path, in the config file
($` + adminclient.ConfigEnv + ` or ~/.config/berth/berthctl.json, mode 0600).
The token itself is read from its file by every command and never stored,
printed or passed in argv. berth-core writes the admin token to admin-token
in its state directory; a project key is what "berthctl key create" printed.`
	c.Example = `  berthctl login --address 127.0.0.1:7700 --token-file /var/lib/berth-core/admin-token`
	return c
}

func (a *app) login(cmd *cobra.Command, _ []string) error {
	path, err := adminclient.ConfigPath(a.getenv)
	if err != nil {
		return err
	}
	// Only the flags and the environment: login replaces what is stored
	// (and works when the stored file is broken).
	s := adminclient.Resolve(a.flags, a.getenv, adminclient.Settings{})
	if s.Address == "" || s.TokenFile == "" {
		return usagef(cmd, "login needs --address HOST:PORT and --token-file PATH")
	}
	s.TokenFile = absPath(s.TokenFile)
	if _, err := a.connect(s); err != nil {
		return err
	}
	resp, err := call(a.installation.GetInstallation, &adminv1.GetInstallationRequest{Name: "installation"})
	if r, ok := errdefs.AsRefusal(err); ok && r.Reason == keyMethodDenied {
		// A project key may not read the installation: check it with the
		// one list it may call.
		return a.loginWithKey(path, s)
	}
	if err != nil {
		return err
	}
	if err := adminclient.SaveSettings(path, s); err != nil {
		return err
	}
	inst := resp.GetInstallation()
	return a.show(resp, func(w io.Writer) {
		fmt.Fprintf(w, "Logged in to %s: installation %s, berth-core %s.\n", s.Address, inst.GetId(), inst.GetCoreVersion())
		fmt.Fprintf(w, "Stored the address and the token file's path in %s.\n", path)
	})
}

// keyMethodDenied is the admin API's refusal of a project key calling an
// administrator's method (core/admin's ReasonKeyMethodDenied).
const keyMethodDenied = "project_key_method_denied"

// loginWithKey checks a project key with ListSessions (one Session at
// most) and stores the settings.
func (a *app) loginWithKey(path string, s adminclient.Settings) error {
	resp, err := call(a.sessions.ListSessions, &adminv1.ListSessionsRequest{PageSize: 1})
	if err != nil {
		return err
	}
	if err := adminclient.SaveSettings(path, s); err != nil {
		return err
	}
	return a.show(resp, func(w io.Writer) {
		fmt.Fprintf(w, "Logged in to %s with a project key: it may manage its project's Sessions and Turns only.\n", s.Address)
		fmt.Fprintf(w, "Stored the address and the token file's path in %s.\n", path)
	})
}
