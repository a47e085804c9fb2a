package adminclient

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// maxTokenFileBytes bounds what ReadToken reads: an admin token is about
// 60 bytes, so a larger file is not a token file.
const maxTokenFileBytes = 4 << 10

// Token is the admin token. Its printers show "[redacted]", so a Token in
// an error, a log line or a %v never shows the secret; only the bearer
// credentials of Dial read it.
type Token struct{ secret string }

const redacted = "[redacted]"

// String returns "[redacted]".
func (Token) String() string { return redacted }

// Format prints "[redacted]" for every verb.
func (Token) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue logs "[redacted]".
func (Token) LogValue() slog.Value { return slog.StringValue(redacted) }

// ReadToken reads the admin token from path (berth-core writes it to
// admin-token in its state directory): one line, surrounding white space
// ignored. Errors name the file, never its content.
func ReadToken(path string) (Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return Token{}, Errorf("token_file_unreadable", "%v", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return Token{}, Errorf("token_file_unreadable", "%v", err)
	}
	data := bytes.TrimSpace(raw)
	switch {
	case len(raw) > maxTokenFileBytes:
		return Token{}, Errorf("token_file_invalid", "%s is larger than an admin token: give the admin-token file of berth-core's state directory", path)
	case len(data) == 0:
		return Token{}, Errorf("token_file_invalid", "%s is empty: give the admin-token file of berth-core's state directory", path)
	}
	for _, c := range data {
		if c <= ' ' || c >= 0x7f {
			return Token{}, Errorf("token_file_invalid", "%s holds more than one token line: give the admin-token file of berth-core's state directory", path)
		}
	}
	return Token{secret: string(data)}, nil
}
