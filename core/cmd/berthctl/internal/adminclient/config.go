package adminclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The environment variables berthctl reads.
const (
	// ConfigEnv names the config file instead of the default path.
	ConfigEnv = "BERTHCTL_CONFIG"
	// AddressEnv overrides the config file's admin address.
	AddressEnv = "BERTH_ADMIN_ADDRESS"
	// TokenFileEnv overrides the config file's token file.
	TokenFileEnv = "BERTH_ADMIN_TOKEN_FILE"
)

// Settings are where the admin API is and which file holds its token: what
// `berthctl login` stores. They never hold the token itself.
type Settings struct {
	// Address is the admin API's host:port (loopback).
	Address string `json:"address"`
	// TokenFile is the path of the file holding the admin token.
	TokenFile string `json:"token_file"`
}

// ConfigPath is the config file's path: $BERTHCTL_CONFIG, or
// berth/berthctl.json in the user's config directory ($XDG_CONFIG_HOME or
// ~/.config).
func ConfigPath(getenv func(string) string) (string, error) {
	if p := getenv(ConfigEnv); p != "" {
		return p, nil
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return "", Errorf("no_config_path", "neither $%s nor $HOME is set: set %s to the config file's path", ConfigEnv, ConfigEnv)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "berth", "berthctl.json"), nil
}

// LoadSettings reads the config file at path. A missing file gives empty
// Settings: a command then needs its flags or the environment.
func LoadSettings(path string) (Settings, error) {
	var s Settings
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, Errorf("config_unreadable", "%v", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, Errorf("config_invalid", "%s is not a berthctl config file: run berthctl login again", path)
	}
	return s, nil
}

// SaveSettings writes s to the config file at path (mode 0600, its folder
// 0700), replacing the file in one rename so a reader never sees half of
// it.
func SaveSettings(path string, s Settings) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Errorf("config_unwritable", "%v", err)
	}
	f, err := os.CreateTemp(dir, ".berthctl-*.json")
	if err != nil {
		return Errorf("config_unwritable", "%v", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return Errorf("config_unwritable", "%v", err)
	}
	if err := f.Close(); err != nil {
		return Errorf("config_unwritable", "%v", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return Errorf("config_unwritable", "%v", err)
	}
	return nil
}

// Resolve fills each setting from the first source that has it: flags,
// then the environment, then the config file's stored settings.
func Resolve(flags Settings, getenv func(string) string, stored Settings) Settings {
	first := func(vs ...string) string {
		for _, v := range vs {
			if v != "" {
				return v
			}
		}
		return ""
	}
	return Settings{
		Address:   first(flags.Address, getenv(AddressEnv), stored.Address),
		TokenFile: first(flags.TokenFile, getenv(TokenFileEnv), stored.TokenFile),
	}
}

// Check refuses settings a command cannot connect with, saying how to
// give the missing one.
func (s Settings) Check() error {
	switch {
	case s.Address == "":
		return Errorf("not_logged_in", "no admin API address: run 'berthctl login --address HOST:PORT --token-file PATH', or pass --address or set %s", AddressEnv)
	case s.TokenFile == "":
		return Errorf("not_logged_in", "no admin token file: run 'berthctl login --address HOST:PORT --token-file PATH', or pass --token-file or set %s", TokenFileEnv)
	}
	return CheckAddress(s.Address)
}

// Error is one of berthctl's own errors, in the admin API's form: a fixed
// reason and a message that says what to do.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// Errorf returns an *Error with reason and a formatted message.
func Errorf(reason, format string, args ...any) error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}
