package runtimebootstrap

import (
	"fmt"
	"strings"
	"testing"
)

func validFile() File {
	return File{
		Version:    Version,
		CoreURL:    "https://core.example.test:8443/berth",
		DeviceID:   "6f1c2f5e-3a4b-4c5d-8e9f-0a1b2c3d4e5f",
		Credential: Secret(strings.Repeat("k", 43)),
	}
}

func TestValidateAcceptsValidFile(t *testing.T) {
	if err := validFile().Validate(); err != nil {
		t.Fatalf("valid file rejected: %v", err)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]func(*File){
		"version":            func(f *File) { f.Version = 2 },
		"empty url":          func(f *File) { f.CoreURL = "" },
		"url scheme":         func(f *File) { f.CoreURL = "ftp://core.example.test" },
		"url user":           func(f *File) { f.CoreURL = "https://u:p@core.example.test" },
		"url query":          func(f *File) { f.CoreURL = "https://core.example.test/?x=1" },
		"url dotdot":         func(f *File) { f.CoreURL = "https://core.example.test/a/../b" },
		"url no host":        func(f *File) { f.CoreURL = "https:///path" },
		"device id":          func(f *File) { f.DeviceID = "not-a-uuid" },
		"device id upper":    func(f *File) { f.DeviceID = strings.ToUpper(f.DeviceID) },
		"device id braces":   func(f *File) { f.DeviceID = "{" + f.DeviceID + "}" },
		"credential short":   func(f *File) { f.Credential = "short" },
		"credential long":    func(f *File) { f.Credential = Secret(strings.Repeat("k", MaxCredentialBytes+1)) },
		"credential space":   func(f *File) { f.Credential = Secret(strings.Repeat("k", 40) + " x") },
		"credential nul":     func(f *File) { f.Credential = Secret(strings.Repeat("k", 40) + "\x00") },
		"credential unicode": func(f *File) { f.Credential = Secret(strings.Repeat("k", 40) + "é") },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			f := validFile()
			mutate(&f)
			err := f.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if c := f.Credential.Reveal(); len(c) > 0 && strings.Contains(err.Error(), c) {
				t.Fatalf("error leaks the credential: %v", err)
			}
		})
	}
}

func TestSecretNeverFormats(t *testing.T) {
	f := validFile()
	value := f.Credential.Reveal()
	for _, out := range []string{
		fmt.Sprint(f.Credential), fmt.Sprintf("%s|%q|%x|%#v|%+v", f.Credential, f.Credential, f.Credential, f.Credential, f.Credential),
		fmt.Sprintf("%v %+v %#v", f, f, f),
	} {
		if strings.Contains(out, value) {
			t.Fatalf("secret printed: %s", out)
		}
	}
}

func TestEncodeCarriesCredentialOnlyInTheFile(t *testing.T) {
	f := validFile()
	data, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"credential":"`+f.Credential.Reveal()+`"`) {
		t.Fatalf("encoded file lacks the credential: %s", data)
	}
	f.Version = 0
	if _, err := Encode(f); err == nil {
		t.Fatal("Encode accepted an invalid file")
	}
}
